#!/usr/bin/env bash
# The torch backend's figures (docs/torch.md, "Measured"): tools/torch-bench (agx against
# Gloo, all-gather from 1 B to 64 MiB per rank) at each rank count, then each example's
# training step with both backends. Needs the build with the backend (build/python/agx/
# _torch…so: scripts/setup.sh, then ninja -C build).
#
#   scripts/torch-bench.sh [--np "2 4"] [--passes P] [--max-bytes 64M] [--results DIR]
#
# Writes DIR/torch-bench-nN.csv and .png (default DIR: results/) and prints the tables
# and the examples' lines. Exit status 1 when a result was wrong or a run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
nps="2 4" passes=5 max=64M results=results
while [ $# -gt 0 ]; do
  case $1 in
    --np) nps=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --max-bytes) max=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    *) echo "torch-bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
ls build/python/agx/_torch.*.so >/dev/null 2>&1 || {
  echo "torch-bench.sh: build/python/agx has no _torch module (install python3-torch and libtorch-dev, then ninja -C build)" >&2; exit 1; }
mkdir -p "$results"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONPATH=$PWD/build/python \
       OMP_NUM_THREADS=1
run() { mpirun.openmpi --oversubscribe -np "$1" -x PYTHONPATH -x OMP_NUM_THREADS /usr/bin/python3 "${@:2}"; }
echo "# $(date -u +%F) commit $(git rev-parse --short HEAD), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores"
status=0
for n in $nps; do
  run "$n" tools/torch-bench --passes "$passes" --max-bytes "$max" \
    --csv "$results/torch-bench-n$n.csv" --png "$results/torch-bench-n$n.png" || status=1
done
for n in $nps; do
  run "$n" examples/torch/tp_mlp.py --steps 12 || status=1
  run "$n" examples/torch/zero3_prefetch.py --steps 6 || status=1
done
exit $status
