#!/usr/bin/env bash
# Manual check of docs/LIMITS.md at full size (minutes; tests/engine/test_limits.cpp runs smaller
# versions in the suite). Each input is generated on the fly and streamed into headsep through a
# pipe (CsvReader reads a pipe exactly as a file, 1 MiB blocks), so nothing big lands on disk:
#  1. a 1 GB field                    -> refused after 16 MiB, bounded memory
#  2. 30000 head columns               -> refused at the header, at once
#  3. a million tokens x 3 scenarios   -> runs, memory linear in the report
#     a report of 2^22 + 1 rows        -> refused
#  4. a CSV of GB/4 and one of GB      -> the same peak memory (default GB = 10: a 10 GB CSV; both
#                                         past the 2^20 reports whose ids stay in memory)
# One line per check: what, exit status, seconds, peak RSS of headsep (wait4), first stderr line.
# Usage: scripts/limits.sh [GB]    Env: HEADSEP_BUILD (default: build, via scripts/setup.sh)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gb=${1:-10}
if [ -z "${HEADSEP_BUILD:-}" ]; then source "$here/scripts/setup.sh"; fi
exec python3 - "$HEADSEP_BUILD/headsep" "$gb" <<'EOF'
import os, subprocess, sys, threading, time

cli, gb = sys.argv[1], float(sys.argv[2])
HEADER = "report_id,scenario,token,decision_axis,evidence_axis,single_weight,head1_weight,head2_weight"
AXES = ["--axes", "d=decision_axis;e=evidence_axis", "-q", "--threads", "2", "--summary", "/dev/null"]

def measure(what, chunks, args=AXES):
    """Streams the byte chunks from `chunks` into `headsep run --input -`; prints one line."""
    t0 = time.time()
    p = subprocess.Popen([cli, "run", "--input", "-"] + args, stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = []
    reader = threading.Thread(target=lambda: err.append(p.stderr.read()))
    reader.start()
    sent = 0
    try:
        for c in chunks:
            p.stdin.write(c)
            sent += len(c)
        p.stdin.close()
    except BrokenPipeError:  # headsep refused the input and stopped reading: expected
        pass
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    line = (err[0].decode(errors="replace").strip().splitlines() or [""])[0]
    print(f"{what:<44} exit {p.returncode:>3}  {time.time() - t0:7.1f} s  peak {ru.ru_maxrss / 1024:8.1f} MiB"
          f"  sent {sent / 2**30:6.2f} GiB  {line[:160]}", flush=True)

def rows(n, row, block=20000):
    """n generated rows (row(i) -> str), header first, in blocks of `block` rows."""
    yield (HEADER + "\n").encode()
    for b in range(0, n, block):
        yield "".join(row(i) for i in range(b, min(n, b + block))).encode()

def big_field(size):
    yield (HEADER + ",note\nr0,s,t,1,2,0.5,0.25,0.25,").encode()
    mib = b"x" * (1 << 20)
    for _ in range(size >> 20):
        yield mib
    yield b"\n"

print(f"headsep limits ({cli})")
measure("1. a 1 GiB field", big_field(1 << 30), AXES)

heads = 30000
hdr = "report_id,scenario,token,decision_axis,evidence_axis,single_weight" + "".join(f",head{k}_weight" for k in range(1, heads + 1))
measure("2. 30000 head columns", iter([(hdr + "\nr0,s,t,1,2,0.5" + ",0.1" * heads + "\n").encode()]))

measure("3. 1 M tokens x 3 scenarios in one report",
        rows(3_000_000, lambda i: f"r0,s{i // 1_000_000},tok{i % 1_000_000},{i % 1_000_000 % 7},{i % 5},0.5,0.25,0.25\n"))
measure("3. one report of 2^22 + 1 rows", rows((1 << 22) + 1, lambda i: f"r0,s,tok{i},{i % 7},{i % 5},0.5,0.25,0.25\n"))

# Seed-like reports (3 scenarios x 3 tokens) with a 200-byte ignored column: a GB is ~4.4 M
# rows, 490 k reports; 10 GB spill the report-id check's table 4 times.
note = "n" * 200
def seed_rows(target_bytes):
    per_report = 9 * (len(note) + 40)
    reports = int(target_bytes // per_report)
    def gen():
        yield (HEADER + ",note\n").encode()
        for b in range(0, reports, 2000):
            out = []
            for r in range(b, min(reports, b + 2000)):
                for s in ("a", "b", "c"):
                    for t in range(3):
                        out.append(f"rep{r:09d},{s},tok{t},{t},{r % 5},0.5,0.25,0.25,{note}\n")
            yield "".join(out).encode()
    return gen()

measure(f"4. a CSV of {gb / 4:g} GB", seed_rows(gb / 4 * 1e9))
measure(f"4. a CSV of {gb:g} GB", seed_rows(gb * 1e9))
EOF
