#!/usr/bin/env bash
# The main job: installs what is missing, builds agx, and runs agx-bench on 4 ranks:
# every agx algorithm and auto side by side with the MPI library's own MPI_Allgather,
# interleaved in one run, with the memory-copy bound. Without arguments it sweeps 1 B to
# 16 MiB per rank (x4); arguments replace that and go to agx-bench (docs/benchmarks.md),
# e.g. --max-bytes 64M --place both --v. Results also land in results/bench-<date>.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ -f build/build.ninja ]; then meson setup --reconfigure build >/dev/null; else meson setup build >/dev/null; fi
ninja -C build >/dev/null
mkdir -p results
csv="results/bench-$(date +%Y%m%d-%H%M%S).csv"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--max-bytes 16M --factor 4)
# Ranks see a terminal under mpirun even when this script's output goes to a file.
[ -t 1 ] || args+=(--no-progress)
mpirun.openmpi --oversubscribe -np "${AGX_BENCH_RANKS:-4}" build/tools/agx-bench --csv "$csv" "${args[@]}"
echo "CSV: $csv"
