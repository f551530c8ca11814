#!/usr/bin/env bash
# The main job: installs what is missing, builds agx, and runs agx-bench on 4 ranks with
# agx's interposer (libagx_pmpi.so) preloaded, so that one interleaved run has, side by
# side: the MPI library's own MPI_Allgather (mpi), the same call through agx's
# interposer (mpi-agx: what a program gets from LD_PRELOAD), auto and every forced agx
# algorithm of the C++ API, and the memory-copy bound, each as a ratio to mpi, under the
# three timing methods (barrier, window, osu; docs/benchmarks.md). Without arguments it
# sweeps 1 B to 16 MiB per rank (x4); arguments replace that and go to agx-bench, e.g.
# --max-bytes 64M --place both --v --method window. Results also land in
# results/bench-<date>.csv. AGX_BENCH_RANKS sets N (default 4); AGX_BENCH_MPI=mpich
# runs against MPICH instead of Open MPI (agx built in build-mpich/, agx-bench and the
# interposer only).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mpi=${AGX_BENCH_MPI:-openmpi}
case $mpi in
  openmpi) dir=build opts=() targets=() ;;
  mpich) dir=build-mpich opts=(-Dmpi=mpich) targets=(tools/agx-bench lib/pmpi/libagx_pmpi.so) ;;
  *) echo "bench.sh: AGX_BENCH_MPI takes openmpi or mpich, not '$mpi'" >&2; exit 2 ;;
esac
if [ -f $dir/build.ninja ]; then meson setup --reconfigure $dir >/dev/null; else meson setup $dir "${opts[@]}" >/dev/null; fi
ninja -C $dir "${targets[@]}" >/dev/null
preload="$PWD/$dir/lib/pmpi/libagx_pmpi.so"
[ -f "$preload" ] || { echo "bench.sh: $preload was not built" >&2; exit 1; }
mkdir -p results
csv="results/bench-$(date +%Y%m%d-%H%M%S).csv"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--max-bytes 16M --factor 4 --method all)
# Ranks see a terminal under mpirun even when this script's output goes to a file.
[ -t 1 ] || args+=(--no-progress)
n=${AGX_BENCH_RANKS:-4}
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# --dropin require: the run fails unless the interposer really is in every rank (an
# argument --dropin ... given to this script comes later and wins).
if [ "$mpi" = openmpi ]; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun.openmpi --oversubscribe -np "$n" -x LD_PRELOAD="$preload" \
    $dir/tools/agx-bench --csv "$csv" --dropin require "${args[@]}"
else
  mpiexec.mpich -n "$n" -genv LD_PRELOAD "$preload" \
    $dir/tools/agx-bench --csv "$csv" --dropin require "${args[@]}"
fi
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CSV: $csv"
