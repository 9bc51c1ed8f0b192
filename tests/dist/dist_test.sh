#!/usr/bin/env bash
# Scale-out tests (docs/DISTRIBUTED.md): the CLI under mpirun against the same command in one
# process, byte for byte; failures on any rank; two network namespaces as two hosts.
# Usage: dist_test.sh CASE HEADSEP FAULT_PLUGIN_DIR SOURCE_DIR
#   CASE: synthetic | csv | failures | netns | scaling | options | model (killed: the killed-rank case of
#   failures alone)
set -uo pipefail
case_=$1 H=$2 F=$3 SRC=$4
# Network namespaces need root: run as a user with sudo rights (the README's other set-up), this
# case runs itself through sudo; without either it fails and says why (netns below), never skips.
if [ "$case_" = netns ] && [ "$(id -u)" != 0 ] && sudo -n true 2> /dev/null; then
  exec sudo -n --preserve-env=LSAN_OPTIONS,ASAN_OPTIONS,UBSAN_OPTIONS bash "$0" "$@"
fi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -x LSAN_OPTIONS)
# The launcher runs as root in CI; one node, any number of ranks.
# Under AddressSanitizer (scripts/test.sh --sanitize) the processes mpirun starts run without
# LeakSanitizer; AddressSanitizer and UBSan stay on, and the one-process runs here keep LSan. Open
# MPI 4.1 does not free its framework state at MPI_Finalize (upstream ships a valgrind suppression
# file for it): a 20-line program that only initializes, sends 1 MiB and finalizes leaks 3 343
# allocations (116 KB) per rank, most from components unloaded at finalize, which LSan reports as
# "<unknown module>" — no suppression can name them, so none would be narrower than this.
MPI_ENV=(env "LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}detect_leaks=0")
export OMPI_MCA_rmaps_base_oversubscribe=1
dir=$(mktemp -d)
# Open MPI's session directory (default /tmp/ompi.HOST.UID): one per test run, so that jobs of
# tests running at the same time (ctest -j, other worktrees) never remove the folder another is
# creating its own in ("A call to mkdir was unable to create the desired directory").
export OMPI_MCA_orte_tmpdir_base="$dir"
cleanup_dir() { rm -rf "$dir"; }
trap cleanup_dir EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# Summaries (*.json) compare byte for byte once run.execution is removed: what the docs name as
# varying between runs that give the same numbers (command line, start time, threads, ranks, SIMD,
# batch size; docs/SUMMARY.md). The rest of the text, layout and digits included, must match.
masked() { python3 -c 'import json, sys
d = json.load(open(sys.argv[1]), object_pairs_hook=dict)
d.get("run", {}).pop("execution", None)
sys.stdout.write(json.dumps(d, indent=2))' "$1"; }
same() {  # same FILE_A FILE_B WHAT
  if [[ "$1" == *.json ]]; then
    if [ "$(masked "$1")" = "$(masked "$2")" ]; then echo "ok: $3"; else fail "$3: $1 and $2 differ"; diff <(masked "$1") <(masked "$2") | head -5 >&2; fi
  elif cmp -s "$1" "$2"; then echo "ok: $3"; else fail "$3: $1 and $2 differ"; cmp "$1" "$2" | head -3 >&2; fi
}
mpi() { timeout 60 "${MPI_ENV[@]}" "${MPIRUN[@]}" "$@"; }

synthetic() {
  local gen=(run -s ops-reports -w axis-focus -p reports=12000 -p names=true --chunk 500 -q)
  "$H" "${gen[@]}" --threads 2 --summary "$dir/one.json" --per-report "$dir/one.jsonl" || fail "one process"
  "$H" "${gen[@]}" --threads 1 --summary "$dir/one-s.json" || fail "one process, summary only"
  for k in 1 2 3; do
    mpi -np $k "$H" "${gen[@]}" --threads 1 --summary "$dir/k$k.json" --per-report "$dir/k$k.jsonl" || fail "-np $k"
    same "$dir/one.json" "$dir/k$k.json" "synthetic summary, -np $k x 1 thread"
    same "$dir/one.jsonl" "$dir/k$k.jsonl" "synthetic per-report rows, -np $k"
    mpi -np $k "$H" "${gen[@]}" --threads 2 --summary "$dir/k$k-s.json" || fail "-np $k summary only"
    same "$dir/one-s.json" "$dir/k$k-s.json" "synthetic summary only, -np $k x 2 threads"
  done
  # Attention: head and pair statistics in the summary, maps of chosen reports (--attention).
  local att=(run -s ops-reports -p reports=700 -p d_model=16 -w qkv -p heads=3 --chunk 64 -q --attention-reports index:3,130,641)
  "$H" "${att[@]}" --summary "$dir/a1.json" --attention "$dir/a1.jsonl" --format csv -o "$dir/a1.csv" || fail "attention, one process"
  mpi -np 3 "$H" "${att[@]}" --threads 1 --summary "$dir/a3.json" --attention "$dir/a3.jsonl" --format csv -o "$dir/a3.csv" || fail "attention -np 3"
  same "$dir/a1.json" "$dir/a3.json" "attention summary, -np 3"
  same "$dir/a1.jsonl" "$dir/a3.jsonl" "attention maps, -np 3"
  same "$dir/a1.csv" "$dir/a3.csv" "attention rows, -np 3"
  # Not launched by mpirun: no MPI at all (the ordinary tests run this way).
  "$H" info | grep -q "^mpi: .*1 rank (not started by an MPI launcher)" || fail "info without mpirun"
  mpi -np 2 "$H" info > "$dir/info" || fail "info under mpirun"
  grep -q "^mpi: .*Open MPI.*2 ranks$" "$dir/info" || fail "info under mpirun -np 2: $(grep mpi "$dir/info")"
  [ "$(grep -c '^headsep' "$dir/info")" = 1 ] || fail "info printed by more than rank 0"
}

csv() {
  python3 "$SRC/tests/dist/make_csv.py" "$dir/in.csv" 1500 || { fail "make_csv"; return; }
  local run=(run -i "$dir/in.csv" --chunk 37 -q)
  "$H" "${run[@]}" --threads 2 --summary "$dir/one.json" --per-report "$dir/one.csv" -o "$dir/one.txt" || fail "one process"
  "$H" "${run[@]}" --threads 2 --summary "$dir/one-s.json" || fail "one process, summary only"
  for k in 1 2 3; do
    mpi -np $k "$H" "${run[@]}" --threads 1 --summary "$dir/k$k.json" --per-report "$dir/k$k.csv" -o "$dir/k$k.txt" || fail "-np $k"
    same "$dir/one.json" "$dir/k$k.json" "CSV summary, -np $k"
    same "$dir/one.csv" "$dir/k$k.csv" "CSV per-report rows, -np $k"
    same "$dir/one.txt" "$dir/k$k.txt" "CSV text rows (the seed's format), -np $k"
    mpi -np $k "$H" "${run[@]}" --summary "$dir/k$k-s.json" || fail "-np $k summary only"
    same "$dir/one-s.json" "$dir/k$k-s.json" "CSV summary only, -np $k"
  done
  # The measured alternatives (docs/DISTRIBUTED.md): byte ranges of the CSV parsed by every rank
  # (--mpi-csv ranges), with quoted newlines, blank lines and tiny blocks (--mpi-csv-block) that
  # put block starts inside quoted fields; rows written at offsets by the rank that computed them
  # (--mpi-rows offsets). Both byte-identical to one process.
  python3 "$SRC/tests/dist/make_csv.py" "$dir/nl.csv" 1500 --newlines || fail "make_csv --newlines"
  local nl=(run -i "$dir/nl.csv" --chunk 37 -q)
  "$H" "${nl[@]}" --threads 2 --summary "$dir/nl1.json" --per-report "$dir/nl1.csv" -o "$dir/nl1.txt" || fail "one process (newlines)"
  "$H" "${nl[@]}" --summary "$dir/nl1-s.json" --per-report "$dir/nl1.jsonl" || fail "one process (newlines, jsonl)"
  for k in 2 3; do
    for bytes in "" 997 101; do
      mpi -np $k "$H" "${nl[@]}" --mpi-csv ranges ${bytes:+--mpi-csv-block $bytes} --threads 1 \
        --summary "$dir/r$k.json" --per-report "$dir/r$k.csv" -o "$dir/r$k.txt" || fail "ranges -np $k ${bytes:-default} bytes"
      same "$dir/nl1.json" "$dir/r$k.json" "byte ranges: summary, -np $k, blocks of ${bytes:-default} bytes"
      same "$dir/nl1.csv" "$dir/r$k.csv" "byte ranges: CSV rows, -np $k, blocks of ${bytes:-default} bytes"
      same "$dir/nl1.txt" "$dir/r$k.txt" "byte ranges: text rows, -np $k, blocks of ${bytes:-default} bytes"
    done
    mpi -np $k "$H" "${nl[@]}" --mpi-rows offsets --threads 1 --summary "$dir/o$k.json" --per-report "$dir/o$k.csv" ||
      fail "offsets -np $k"
    same "$dir/nl1.json" "$dir/o$k.json" "offset writes: summary, -np $k"
    same "$dir/nl1.csv" "$dir/o$k.csv" "offset writes: CSV rows, -np $k"
    mpi -np $k "$H" "${nl[@]}" --mpi-rows offsets --threads 1 --format jsonl -o "$dir/o$k.jsonl" || fail "offsets -np $k jsonl"
    same "$dir/nl1.jsonl" "$dir/o$k.jsonl" "offset writes: JSON lines via --output, -np $k"
  done
  # A bad row found by rank 1 in its range: the file's line, as one process names it.
  python3 "$SRC/tests/dist/make_csv.py" "$dir/nlbad.csv" 1500 4000 --newlines || fail "make_csv"
  "$H" run -i "$dir/nlbad.csv" -q --summary "$dir/x.json" 2> "$dir/err1"
  local want
  want=$(grep -o "nlbad.csv:[0-9]*: column 'decision_axis': 'oops' is not a finite number" "$dir/err1")
  [ -n "$want" ] || fail "one process names the bad row: $(cat "$dir/err1")"
  mpi -np 2 "$H" run -i "$dir/nlbad.csv" --mpi-csv ranges --mpi-csv-block 3001 -q --summary "$dir/x.json" 2> "$dir/err2" &&
    fail "ranges: a bad row passed"
  grep -qF "$want" "$dir/err2" || fail "ranges: bad row not named as one process names it ($want): $(head -3 "$dir/err2")"
  [ ! -e "$dir/x.json" ] || fail "ranges: output left after a bad row"
  # Synthetic source, offset writes: rank 0's rows and the others' interleave at their offsets.
  local gen=(run -s ops-reports -w axis-focus -p reports=5000 -p names=true --chunk 300 -q)
  "$H" "${gen[@]}" --threads 1 --per-report "$dir/g1.csv" || fail "one process (synthetic)"
  mpi -np 3 "$H" "${gen[@]}" --mpi-rows offsets --threads 1 --per-report "$dir/g3.csv" || fail "offsets, synthetic -np 3"
  same "$dir/g1.csv" "$dir/g3.csv" "offset writes: synthetic CSV rows, -np 3"
  # Rows on stdout (the seed's text format) from rank 0 only.
  "$H" run -i "$dir/in.csv" --chunk 37 > "$dir/one.out" || fail "stdout, one process"
  mpi -np 2 "$H" run -i "$dir/in.csv" --chunk 37 > "$dir/k2.out" || fail "stdout, -np 2"
  same "$dir/one.out" "$dir/k2.out" "CSV rows on stdout, -np 2"
}

# expect_failure NAME CAUSE ARGS...: exit non-zero within the timeout, CAUSE on stderr, no file left.
expect_failure() {
  local name=$1 cause=$2
  shift 2
  local out="$dir/f"
  rm -rf "$out" && mkdir -p "$out"
  local start=$SECONDS
  timeout 60 "${MPI_ENV[@]}" "${MPIRUN[@]}" "$@" --summary "$out/s.json" --per-report "$out/rows.jsonl" -q 2> "$dir/err"
  local rc=$?
  if [ $rc = 0 ]; then fail "$name: exit status 0"; elif [ $rc = 124 ]; then fail "$name: hung (killed after 60 s)"; fi
  grep -qF -- "$cause" "$dir/err" || { fail "$name: stderr lacks '$cause'"; sed 's/^/  | /' "$dir/err" >&2; }
  [ -z "$(ls -A "$out")" ] || fail "$name: left $(ls -A "$out")"
  echo "ok: $name (exit $rc, $((SECONDS - start)) s)"
}

failures() {
  local fg=(--plugin-dir "$F" -s fail-gen --axes "a=x;b=y" -p reports=6000 --chunk 100 --threads 1)
  expect_failure "plugin error on rank 1's chunk (random access)" "error: rank 1 (" \
    -np 3 "$H" run "${fg[@]}" -w uniform -p random_access=true -p fail_at=7
  grep -qF "chunk 7: next_chunk failed: injected failure at chunk 7" "$dir/err" || fail "cause of the rank 1 failure"
  expect_failure "plugin error on rank 0's chunk (random access)" "error: rank 0 (" \
    -np 3 "$H" run "${fg[@]}" -w uniform -p random_access=true -p fail_at=9
  grep -qF "injected failure at chunk 9" "$dir/err" || fail "cause of the rank 0 failure"
  expect_failure "weighting error on rank 2 (chunk read by rank 0)" "injected failure at report 500" \
    -np 3 "$H" run "${fg[@]}" -w fail-weighting -p fail_report=500
  grep -qF "error: rank 2 (" "$dir/err" || fail "the weighting failure names rank 2"
  python3 "$SRC/tests/dist/make_csv.py" "$dir/bad.csv" 1500 4000 || fail "make_csv"
  expect_failure "a bad CSV row (rank 0 reads)" "bad.csv:4002: column 'decision_axis': 'oops' is not a finite number" \
    -np 2 "$H" run -i "$dir/bad.csv" --chunk 37
  grep -qF "error: rank 0 (" "$dir/err" || fail "the CSV failure names rank 0"
  killed
}

# A rank killed outright: mpirun sends the others SIGTERM, then SIGKILL odls_base_sigkill_timeout
# seconds later. Rank 0's unfinished outputs are unnamed files (O_TMPFILE, runtime/io/output_file.cpp), so
# a SIGKILL before its handler ran leaves nothing either: checked with mpirun's default (1 s) and
# with 0 (SIGKILL at once), where named temporaries were left in 6 runs of 8 (docs/DISTRIBUTED.md).
# `dist_test.sh killed ...` runs this case alone; KILL_GRACE=S runs it with that grace only.
killed() {
  local fg=(--plugin-dir "$F" -s fail-gen --axes "a=x;b=y" -p reports=200000 --chunk 100 --threads 1)
  local grace
  for grace in ${KILL_GRACE-default 0}; do
    local mca=()
    [ "$grace" = default ] || mca=(--mca odls_base_sigkill_timeout "$grace")
    expect_failure "rank 1 killed outright (SIGKILL), kill grace $grace" "exited on signal 9" \
      -np 3 "${mca[@]}" "$H" run "${fg[@]}" -w uniform -p random_access=true -p fail_at=7 -p mode=kill
  done
}

netns() {
  # Two hosts on one machine: network namespaces joined by a veth pair, one rank in each, MPI
  # over TCP only (no shared memory); mpirun starts the remote rank through `ip netns exec`.
  if ! command -v ip > /dev/null; then fail "netns: 'ip' (iproute2) is not installed"; return; fi
  a=hs$$a b=hs$$b va=hs$$va vb=hs$$vb
  local net=10.$((RANDOM % 200 + 20)).$((RANDOM % 250)).
  # Deleting a namespace deletes the veth end inside it, and with it the pair.
  ns_cleanup() { ip netns del "$a" 2> /dev/null; ip netns del "$b" 2> /dev/null; cleanup_dir; }
  trap ns_cleanup EXIT
  if ! err=$(ip netns add "$a" 2>&1); then
    fail "netns: cannot create a network namespace ($err): this test needs root or CAP_NET_ADMIN and CAP_SYS_ADMIN"
    return
  fi
  ip netns add "$b" && ip link add "$va" type veth peer name "$vb" && ip link set "$va" netns "$a" &&
    ip link set "$vb" netns "$b" && ip -n "$a" addr add "${net}1/24" dev "$va" && ip -n "$b" addr add "${net}2/24" dev "$vb" &&
    ip -n "$a" link set "$va" up && ip -n "$b" link set "$vb" up && ip -n "$a" link set lo up && ip -n "$b" link set lo up ||
    { fail "netns: setting up the veth pair failed"; return; }
  # plm_rsh_agent: called as AGENT HOST COMMAND...; runs the command in HOST's namespace.
  cat > "$dir/agent" << EOF
#!/bin/sh
host=\$1; shift
case "\$host" in ${net}2) ns=$b ;; *) ns=$a ;; esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
EOF
  chmod +x "$dir/agent"
  printf '%s slots=1\n%s slots=1\n' "${net}1" "${net}2" > "$dir/hosts"
  local gen=(run -s ops-reports -w axis-focus -p reports=6000 --chunk 500 -q --threads 1)
  "$H" "${gen[@]}" --summary "$dir/one.json" --per-report "$dir/one.jsonl" || fail "netns: one process"
  python3 "$SRC/tests/dist/make_csv.py" "$dir/in.csv" 600 || fail "make_csv"
  "$H" run -i "$dir/in.csv" --chunk 37 -q --summary "$dir/csv1.json" || fail "netns: one process (CSV)"
  local over=(timeout 60 "${MPI_ENV[@]}" ip netns exec "$a" mpirun --allow-run-as-root --hostfile "$dir/hosts" -np 2
    --mca plm_rsh_agent "$dir/agent" --mca pml ob1 --mca btl tcp,self
    --mca btl_tcp_if_include "${net}0/24" --mca oob_tcp_if_include "${net}0/24" -x LSAN_OPTIONS)
  "${over[@]}" sh -c 'echo "$OMPI_COMM_WORLD_RANK $(ip -o -4 addr show | grep -o "inet [0-9.]*" | grep -v 127.0.0.1)"' \
    > "$dir/where" || fail "netns: mpirun across namespaces"
  sort "$dir/where" | tr '\n' ' ' | grep -q "^0 inet ${net}1 1 inet ${net}2 $" ||
    fail "netns: ranks not one per namespace: $(cat "$dir/where")"
  "${over[@]}" "$H" "${gen[@]}" --mpi-stats --summary "$dir/two.json" --per-report "$dir/two.jsonl" 2> "$dir/err" ||
    { fail "netns: the run across namespaces"; cat "$dir/err" >&2; }
  same "$dir/one.json" "$dir/two.json" "summary, two namespaces over TCP"
  same "$dir/one.jsonl" "$dir/two.jsonl" "per-report rows, two namespaces over TCP"
  grep -q "rank 1 of 2 sent [1-9]" "$dir/err" || fail "netns: rank 1 sent nothing? $(cat "$dir/err")"
  "${over[@]}" "$H" run -i "$dir/in.csv" --chunk 37 -q --summary "$dir/csv2.json" || fail "netns: CSV across namespaces"
  same "$dir/csv1.json" "$dir/csv2.json" "CSV summary, two namespaces over TCP"
  # The measured alternatives across hosts: byte ranges work (each host maps the file); offset
  # writes need one host and say so.
  "${over[@]}" "$H" run -i "$dir/in.csv" --mpi-csv ranges --chunk 37 -q --summary "$dir/csv3.json" ||
    fail "netns: CSV byte ranges across namespaces"
  same "$dir/csv1.json" "$dir/csv3.json" "CSV summary from byte ranges, two namespaces over TCP"
  "${over[@]}" "$H" "${gen[@]}" --mpi-rows offsets --per-report "$dir/off.csv" 2> "$dir/err" &&
    fail "netns: offset writes across hosts were not refused"
  grep -qF "all ranks on one host" "$dir/err" || fail "netns: offset writes refusal: $(head -3 "$dir/err")"
  [ ! -e "$dir/off.csv" ] || fail "netns: offset writes left a file"
}

# `headsep scaling --ranks`: the same job under the launcher at each rank count, the summaries
# compared, the table and JSON from rank 0's profile; bad launchers named.
scaling() {
  local launcher="env LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}detect_leaks=0 ${MPIRUN[*]} -np {ranks}"
  local job=(-s ops-reports -w axis-focus -p reports=30000 -p seed=7 --chunk 1000 -q)
  "$H" scaling --ranks 1,2,3 --launcher "$launcher" --repeat 2 "${job[@]}" --json "$dir/sc.json" \
    --report-html "$dir/sc.html" > "$dir/sc.txt" 2> "$dir/sc.err" || fail "scaling --ranks: $(tail -5 "$dir/sc.err")"
  grep -q "^  ranks " "$dir/sc.txt" || fail "scaling --ranks: no ranks column: $(head -2 "$dir/sc.txt")"
  grep -q "^each rank at 1 thread;" "$dir/sc.txt" || fail "scaling --ranks: no note on what the times are"
  python3 - "$dir/sc.json" <<'PY' || fail "scaling --ranks: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
c = d["counts"]
assert d["outputs_identical"] is True, d["outputs_identical"]
assert [e["ranks"] for e in c] == [1, 2, 3] and all(e["threads"] == 1 for e in c), c
for e in c:
    assert len(e["walls_s"]) == 2 and e["wall_s"] in e["walls_s"], e
    assert e["reports"] == 30000 and e["groups"] == 90000, e
    assert abs(e["speedup"] - c[0]["wall_s"] / e["wall_s"]) < 1e-9, e
    assert abs(e["efficiency"] - e["speedup"] / e["ranks"]) < 1e-9, e
    p = e["profile"]
    assert p["wall_s"] == e["wall_s"] and p["reports"] == 30000, p
    kinds = {s["kind"] for s in p["stages"]}
    assert {"input", "prepare", "consume"} <= kinds, kinds
# Rank 0 computes its share (every chunk i with i mod K == 0) and merges all 30.
for e in c:
    k = e["ranks"]
    gen = [s for s in e["profile"]["stages"] if s["kind"] == "generate"]
    assert gen and gen[0]["batches"] == len(range(0, 30, k)), (k, gen)
    cons = [s for s in e["profile"]["stages"] if s["kind"] == "consume"]
    assert cons[0]["batches"] == 30, cons
PY
  grep -q "Speedup against ranks" "$dir/sc.html" || fail "scaling --ranks: the report's figure is not against ranks"
  # Refused: no {ranks}; --counts with --ranks; a launcher that fails (named, with its exit status).
  "$H" scaling --ranks 1,2 --launcher "mpirun -np 2" "${job[@]}" 2> "$dir/err" && fail "scaling: launcher without {ranks} accepted"
  grep -qF "{ranks}" "$dir/err" || fail "scaling: launcher without {ranks}: $(head -2 "$dir/err")"
  "$H" scaling --ranks 1,x "${job[@]}" 2> "$dir/err" && fail "scaling: --ranks 1,x accepted"
  grep -qF -- "--ranks: 'x' is not a count" "$dir/err" || fail "scaling: --ranks 1,x: $(head -2 "$dir/err")"
  "$H" scaling --ranks 1,2 --counts 1,2 "${job[@]}" 2> "$dir/err" && fail "scaling: --ranks with --counts accepted"
  grep -q "exclude each other" "$dir/err" || fail "scaling: --ranks with --counts: $(head -2 "$dir/err")"
  "$H" scaling --ranks 2 --launcher "false {ranks}" "${job[@]}" 2> "$dir/err" && fail "scaling: a failing launcher gave exit 0"
  grep -q "scaling --ranks 2: \`false 2 .* exited 1" "$dir/err" || fail "scaling: failing launcher not named: $(head -2 "$dir/err")"
  return 0
}

# The scale-out flags of `headsep run` (docs/DISTRIBUTED.md): a bad value is a usage error (exit 2)
# naming the flag, in one process too; good values change nothing in one process; the
# combinations a multi-rank run refuses name the flag.
options() {
  local gen=(run -s ops-reports -w axis-focus -p reports=300 -q --threads 1)
  local bad
  for bad in "--mpi-csv bytes" "--mpi-rows scatter" "--mpi-csv-block 0" "--mpi-csv-block 12k" "--mpi-stats=maybe"; do
    # shellcheck disable=SC2086
    "$H" "${gen[@]}" $bad --summary "$dir/x.json" 2> "$dir/err"
    local rc=$? flag=${bad%%[ =]*}
    [ $rc = 2 ] || fail "$bad: exit $rc, not 2"
    grep -qF -- "$flag" "$dir/err" || fail "$bad: the message does not name $flag: $(head -2 "$dir/err")"
    [ ! -e "$dir/x.json" ] || fail "$bad: output written"
    echo "ok: $bad refused (exit $rc): $(head -1 "$dir/err")"
  done
  "$H" "${gen[@]}" --summary "$dir/one.json" --per-report "$dir/one.csv" || fail "one process"
  "$H" "${gen[@]}" --mpi-csv ranges --mpi-rows offsets --mpi-csv-block 7 --mpi-stats --summary "$dir/f.json" \
    --per-report "$dir/f.csv" 2> "$dir/err" || fail "one process with every flag"
  same "$dir/one.json" "$dir/f.json" "one process ignores the flags: summary"
  same "$dir/one.csv" "$dir/f.csv" "one process ignores the flags: rows"
  [ ! -s "$dir/err" ] || fail "one process, --mpi-stats printed: $(head -2 "$dir/err")"
  # expect_usage NAME MESSAGE ARGS...: under mpirun -np 2, exit non-zero and MESSAGE on stderr.
  expect_usage() {
    local name=$1 msg=$2
    shift 2
    mpi -np 2 "$H" "$@" 2> "$dir/err" && fail "$name: accepted"
    grep -qF -- "$msg" "$dir/err" || fail "$name: stderr lacks '$msg': $(head -3 "$dir/err")"
    echo "ok: $name refused"
  }
  python3 "$SRC/tests/dist/make_csv.py" "$dir/in.csv" 200 || fail "make_csv"
  expect_usage "--mpi-rows offsets, summary only" "--mpi-rows offsets: rows to one file" \
    "${gen[@]}" --mpi-rows offsets --summary "$dir/x.json"
  expect_usage "--mpi-csv ranges with --report" "--mpi-csv ranges: --report, --attention" \
    run -i "$dir/in.csv" -q --mpi-csv ranges --report rep1 --summary "$dir/x.json"
  expect_usage "--mpi-rows offsets with --mpi-csv ranges" "--mpi-rows offsets does not combine with --mpi-csv ranges" \
    run -i "$dir/in.csv" -q --mpi-csv ranges --mpi-rows offsets --per-report "$dir/x.csv"
  expect_usage "a bad value under mpirun" "--mpi-rows: expected gather (the default) or offsets" \
    "${gen[@]}" --mpi-rows scatter --summary "$dir/x.json"
  mpi -np 2 "$H" "${gen[@]}" --mpi-stats --summary "$dir/k2.json" 2> "$dir/err" || fail "--mpi-stats -np 2"
  same "$dir/one.json" "$dir/k2.json" "--mpi-stats: summary unchanged, -np 2"
  [ "$(grep -c "^headsep: mpi: rank [01] of 2 sent" "$dir/err")" = 2 ] || fail "--mpi-stats: not one line per rank: $(cat "$dir/err")"
  [ ! -e "$dir/x.json" ] && [ ! -e "$dir/x.csv" ] || fail "a refused run left a file"
}

# run --model (docs/MODEL.md): ops-text (random access, generated where computed) and a text file
# (sequential, read by rank 0), the latter also with the model's own axes: summary, --per-report
# rows and --attention maps as one process gives.
model() {
  local m=${HEADSEP_MODEL_DIR:-${HEADSEP_MODEL_CACHE:-$HOME/.cache/headsep}/all-minilm-l6-v2}
  [ -f "$m/model.safetensors" ] || { fail "the test model is not in $m: run scripts/fetch_model.sh"; return; }
  python3 -c "
import random
random.seed(3)
w = 'stop the pump pressure hold rose valve seal leak when stable replaced night crew decision return'.split()
print('report_id,scenario,text')
for i in range(23):
    t = ' '.join(random.choice(w) for _ in range(random.randint(1, 30)))
    print(f'x{i},{\"ab\"[i % 7 < 3]},' + {5: '', 14: '\"   \"'}.get(i, t))
" > "$dir/t.csv" || { fail "texts"; return; }
  local ops=(run -q -s ops-text -p reports=12 --model "$m" --chunk 3 --threads 1 --attention-reports index:2,7,11 --attention-layers 1,3)
  # Two empty texts and texts past 16 tokens: their counts travel with the chunks (report_status).
  local txt=(run -q -s text -p "path=$dir/t.csv" -p max_tokens=16 --model "$m" --chunk 3 --threads 1 --attention-reports id:x4,x20)
  # The model's own axes (docs/METRICS.md): token classes, a semantic axis and direction axes (one
  # per layer, one shared), computed on each rank from the same files.
  python3 - "$dir" <<'EOF' || { fail "axis files"; return; }
import json, random, struct, sys
d, rng = sys.argv[1], random.Random(46)
json.dump({"certainty": {"plus": ["definitely", "clearly"], "minus": ["maybe", "perhaps"]}}, open(f"{d}/sem.json", "w"))
header, data = {}, b""
for name, shape in (("probe", [6, 384]), ("steer", [384])):
    n = 6 * 384 if len(shape) == 2 else 384
    b = struct.pack(f"<{n}f", *(rng.gauss(0, 1) for _ in range(n)))
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(f"{d}/dir.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF
  local axes=("${txt[@]}" --token-axes all --semantic-axes "$dir/sem.json" --direction-axes "$dir/dir.safetensors")
  local k job
  for job in ops txt axes; do
    local -n cmd=$job
    "$H" "${cmd[@]}" --summary "$dir/$job-1.json" --per-report "$dir/$job-1.csv" --attention "$dir/$job-1.maps" || fail "$job: one process"
    masked "$dir/$job-1.json" | grep -v '"seconds"' > "$dir/$job-1.s"
    [ $job = ops ] || { grep -q '"empty_reports": *[1-9]' "$dir/$job-1.json" && grep -q '"truncated_reports": *[1-9]' "$dir/$job-1.json"; } ||
      fail "model $job: the summary counts no empty or truncated reports"
    [ $job != axes ] || grep -q '"steer"' "$dir/$job-1.json" || fail "model axes: the direction axes are not in the summary"
    for k in 2 3; do
      mpi -np $k "$H" "${cmd[@]}" --summary "$dir/$job-$k.json" --per-report "$dir/$job-$k.csv" --attention "$dir/$job-$k.maps" ||
        fail "$job: -np $k"
      masked "$dir/$job-$k.json" | grep -v '"seconds"' > "$dir/$job-$k.s"
      same "$dir/$job-1.s" "$dir/$job-$k.s" "model $job: summary (seconds aside), -np $k"
      same "$dir/$job-1.csv" "$dir/$job-$k.csv" "model $job: per-report rows, -np $k"
      same "$dir/$job-1.maps" "$dir/$job-$k.maps" "model $job: attention maps, -np $k"
    done
  done
  mpi -np 2 "$H" run -q -s ops-text -p reports=4 --model "$m" --report-html "$dir/x.html" 2> "$dir/err"
  [ $? = 2 ] && grep -q "report without mpirun" "$dir/err" || fail "model: --report-html under mpirun not refused: $(head -2 "$dir/err")"
  [ ! -e "$dir/x.html" ] || fail "model: a refused run left a file"
}

"$case_"
[ $fails = 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
