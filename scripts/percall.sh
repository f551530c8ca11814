#!/usr/bin/env bash
# Instructions per repeated MPI_Allgather of 8 bytes per rank, counted with callgrind
# (independent of the machine's load): the MPI library's own call, agx's C++ API, and
# MPI_Allgather through the interposer; for agx, also the part outside the algorithm's
# run (run_blocking: the path the choice names, direct-write check included): the
# per-call cost of the front end.
# Then the same three calls timed on one rank (no peer: the call moves only its own 8
# bytes), median of 9 batches of 100,000 calls, each path run 3 times alternating: the
# interposer's time minus the C++ API's is the interposer's own per-call cost in ns.
#   scripts/percall.sh [build dir (default build)] [ranks (default 2)] [calls (default 2000)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}; np=${2:-2}; calls=${3:-2000}
bin=$build/tools/agx-percall pre=$build/lib/pmpi/libagx_pmpi.so
[ -x "$bin" ] || { echo "percall.sh: $bin not built (needs valgrind/callgrind.h)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
run() {  # run <name> <path> [preload]
  mpirun -np "$np" --oversubscribe env ${3:+LD_PRELOAD=$3} valgrind --tool=callgrind \
    --callgrind-out-file="$out/$1.%p" "$bin" 8 "$calls" "$2" >/dev/null 2>&1
}
run native mpi; run cxx cxx; run interposer mpi "$pre"
python3 - "$out" "$calls" "$np" <<'PY'
import glob, re, subprocess, sys
out, calls, np = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tops = {"native": "MPI_Allgather", "cxx": "agx::allgather_bytes(", "interposer": "MPI_Allgather"}
names = {"native": "the MPI library's MPI_Allgather", "cxx": "agx C++ API (agx::Allgather)",
         "interposer": "MPI_Allgather through the interposer"}
print(f"| {np} ranks, 8 B, {calls} repeated calls | instructions per call (rank 0) | outside the run |")
print("|---|---|---|")
for k in ("native", "cxx", "interposer"):
    f = sorted(glob.glob(f"{out}/{k}.*.1"))[0]  # rank 0's dump of the repeated calls
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f],
                          capture_output=True, text=True, check=True).stdout
    d = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(?:\?\?\?|\S+?\.\w+):(.*) \[(.*)\]$", line)
        if m: d[m.group(2)] = d.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    g = lambda p: sum(v for name, v in d.items() if name.startswith(p)) / calls
    top = max(g(tops[k]), g("P" + tops[k]))  # Open MPI's MPI_Allgather is PMPI_Allgather
    inner = g("agx::run_blocking(")
    print(f"| {names[k]} | {top:.0f} | {'' if k == 'native' else f'{top - inner:.0f}'} |")
PY
timed() {  # timed <path> [preload]: ns per call on one rank
  mpirun -np 1 env ${2:+LD_PRELOAD=$2} "$bin" 8 100000 "$1" time 2>/dev/null | tail -1
}
python3 - "$(for pass in 1 2 3; do echo "$(timed mpi) $(timed cxx) $(timed mpi "$pre")"; done)" <<'PY'
import statistics, sys
rows = [list(map(float, line.split())) for line in sys.argv[1].splitlines()]
native, cxx, inter = (statistics.median(r[i] for r in rows) for i in range(3))
print()
print("| 1 rank, 8 B, median of 3 runs (9 batches of 100,000 calls each) | ns per call |")
print("|---|---|")
print(f"| the MPI library's MPI_Allgather | {native:.1f} |")
print(f"| agx C++ API (agx::Allgather) | {cxx:.1f} |")
print(f"| MPI_Allgather through the interposer | {inter:.1f} |")
print(f"| the interposer's own cost (interposer - C++ API) | {inter - cxx:.1f} |")
PY
