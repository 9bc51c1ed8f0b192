#!/usr/bin/env bash
# What the model's own context axes cost (docs/METRICS.md, "Context axes of a model run"):
# all-MiniLM-L6-v2 over N texts cut at 64 tokens, 2 threads, the lexicon's three axes alone against
# the same run with two semantic axes and two direction axes added (and the three token-class axes),
# runs interleaved, each variant's median over REPS of the run's own seconds (the summary's
# "seconds": the pipeline, the axes' set-up excluded) and of the process's wall time (set-up included:
# for semantic axes a cosine per vocabulary row).
#   bash bench/context_axes_overhead.sh [BUILD_DIR]     (HEADSEP_BENCH_REPORTS=N, default 2000; REPS=7)
set -euo pipefail
BUILD=${1:-build}
CLI="$BUILD/runtime/cli/headsep"
[[ -x "$CLI" ]] || CLI="$BUILD/headsep"
MODEL=${HEADSEP_MODEL_DIR:-$(bash "$(dirname "$0")/../scripts/fetch_model.sh")}
N=${HEADSEP_BENCH_REPORTS:-2000}
REPS=${REPS:-7}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

python3 - "$TMP" "$N" <<'EOF'
import json, random, struct, sys
tmp, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(46)
words = ("the pump pressure rose after the valve was closed and the operator said it was maybe a sensor fault "
         "but clearly the bearing temperature kept rising so the line was stopped until a technician could "
         "inspect it perhaps tomorrow morning").split()
with open(f"{tmp}/texts.jsonl", "w") as f:
    for i in range(n):  # ~70 words: every report cut at 64 tokens
        f.write(json.dumps({"report_id": f"r{i}", "text": " ".join(rng.choice(words) for _ in range(70))}) + "\n")
json.dump({"certainty": {"plus": ["definitely", "certainly", "clearly"], "minus": ["maybe", "perhaps", "possibly"]},
           "urgency": {"plus": ["immediately", "urgent", "now"], "minus": ["later", "eventually", "tomorrow"]}},
          open(f"{tmp}/semantic.json", "w"))
L, D = 6, 384  # MiniLM: two direction axes, one per layer and one shared
vals = {"probe": [rng.gauss(0, 1) for _ in range(L * D)], "steer": [rng.gauss(0, 1) for _ in range(D)]}
header, off, data = {}, 0, b""
for name, shape in (("probe", [L, D]), ("steer", [D])):
    b = struct.pack(f"<{len(vals[name])}f", *vals[name])
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
    off += len(b)
    data += b
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(f"{tmp}/directions.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF

base=(run -s text -p "path=$TMP/texts.jsonl" -p max_tokens=64 --model "$MODEL" --threads 2 --quiet)
declare -A args=(
  [lexicon]=""
  [semantic]="--axes decision=decision_axis;evidence=evidence_axis;condition=condition_axis --semantic-axes $TMP/semantic.json"
  [direction]="--axes decision=decision_axis;evidence=evidence_axis;condition=condition_axis --direction-axes $TMP/directions.safetensors"
  [semantic+direction]="--axes decision=decision_axis;evidence=evidence_axis;condition=condition_axis --semantic-axes $TMP/semantic.json --direction-axes $TMP/directions.safetensors"
  [all]="--axes decision=decision_axis;evidence=evidence_axis;condition=condition_axis --token-axes all --semantic-axes $TMP/semantic.json --direction-axes $TMP/directions.safetensors"
)
variants=(lexicon semantic direction semantic+direction all)
for v in "${variants[@]}"; do : >"$TMP/$v.run" && : >"$TMP/$v.wall"; done
"$CLI" "${base[@]}" >/dev/null 2>&1  # warm the page cache
for ((i = 0; i < REPS; ++i)); do
  for v in "${variants[@]}"; do
    read -r -a extra <<<"${args[$v]}"
    t0=$(date +%s.%N)
    "$CLI" "${base[@]}" "${extra[@]}" --summary "$TMP/s.json" >/dev/null 2>&1
    t1=$(date +%s.%N)
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['seconds'])" "$TMP/s.json" >>"$TMP/$v.run"
    echo "$t1 - $t0" | bc -l >>"$TMP/$v.wall"
  done
done
median() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
lr=$(median "$TMP/lexicon.run") lw=$(median "$TMP/lexicon.wall")
printf "%-20s %10s %10s %10s %10s   (%s reports x 64 tokens, 2 threads, median of %s)\n" variant "run s" "vs lexicon" "wall s" "vs lexicon" "$N" "$REPS"
for v in "${variants[@]}"; do
  r=$(median "$TMP/$v.run") w=$(median "$TMP/$v.wall")
  printf "%-20s %10.3f %+9.1f%% %10.3f %+9.1f%%\n" "$v" "$r" "$(echo "100 * ($r / $lr - 1)" | bc -l)" "$w" "$(echo "100 * ($w / $lw - 1)" | bc -l)"
done
