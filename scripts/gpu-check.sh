#!/bin/bash
# The GPU check (docs/gpu.md), for one node with a GPU, the CUDA toolkit and driver,
# and no package access; what else it needs comes from scripts/gpu-prepare.sh
# (KIT_DIR, default shared/gpu-kit, copied along with the tree). A few minutes:
#   1. builds with -Dcuda=enabled (only libagx, the interposer and test/cuda);
#   2. correctness on 2 and 4 ranks sharing the GPU: the seam tests, the runtime test
#      with every path forced and auto (device, managed, pinned, mixed host/device;
#      float, __half, __nv_bfloat16; out of place, in place, v), and MPI_Allgather on
#      device pointers through the preloaded interposer;
#   3. times each path against the device-to-device copy bound (agx-gpu-bench).
# Exit status 0 when every check passed.
#
#   scripts/gpu-check.sh [KIT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
kit=${1:-shared/gpu-kit}
[ -f "$kit/env.sh" ] && . "$kit/env.sh"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi -L || { echo "gpu-check: no GPU visible (nvidia-smi failed)"; exit 1; }
build=${AGX_GPU_BUILD:-build-gpu}
if [ -d "$build" ]; then meson setup --reconfigure "$build" -Dcuda=enabled >/dev/null
else meson setup "$build" -Dcuda=enabled >/dev/null; fi || exit 1
t0=$(date +%s)
ninja -C "$build" lib/pmpi/libagx_pmpi.so test/cuda/test_seam test/cuda/test_cuda_runtime \
  test/cuda/agx-gpu-bench || exit 1
echo "gpu-check: build $(( $(date +%s) - t0 )) s"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=$(command -v mpirun.openmpi || command -v mpirun)
run() { timeout 300 "$mpirun" --oversubscribe --bind-to none "$@"; }
fails=0
check() {  # check NAME COMMAND...: runs, prints PASS/FAIL
  local name=$1; shift
  if out=$("$@" 2>&1); then echo "PASS $name"; else echo "FAIL $name"; echo "$out" | tail -20; fails=$((fails + 1)); fi
}
t=$build/test/cuda
for np in 2 4; do
  check "seam np$np" run -np $np $t/test_seam
  for path in auto aware staging ipc; do
    check "runtime $path np$np" run -np $np -x AGX_CUDA_PATH=$path -x AGX_VERBOSE=1 $t/test_cuda_runtime
  done
  check "interposer np$np" run -np $np -x LD_PRELOAD=$PWD/$build/lib/pmpi/libagx_pmpi.so $t/test_cuda_runtime --mpi
done
echo
echo "path     bytes/rank      agx time          D2D copy bound    agx/bound   (ranks share one GPU)"
for np in 2 4; do
  echo "-- $np ranks"
  for path in staging aware ipc; do
    run -np $np -x AGX_CUDA_PATH=$path $t/agx-gpu-bench || fails=$((fails + 1))
  done
done
echo "gpu-check: $fails failed"
[ $fails -eq 0 ]
