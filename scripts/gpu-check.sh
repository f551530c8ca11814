#!/bin/bash
# The GPU check (docs/gpu.md), for one node with a GPU, the CUDA toolkit and driver, and
# no network or package access: only a copy of the working tree (with the kit that
# scripts/gpu-prepare.sh unpacked from .deb files, KIT_DIR, default shared/gpu-kit) is
# there. Budget: well inside 10 minutes on 16 cores. Every result goes to $OUT (default
# ./gpu-check-out): check.log (everything), results.txt (PASS/FAIL lines and the
# timing table), meson-logs/.
#   1. builds with -Dcuda=enabled (meson's output shown), only what the check runs;
#   2. correctness at 1, 2, 4 and 8 ranks sharing the GPU: the runtime test with every
#      path forced and auto (device, managed, pinned, mixed host/device; float, __half,
#      __nv_bfloat16; out of place, in place, v, start, plan), per-rank displacements
#      and sub-allocation offsets on the IPC path (test_fake --case=displs runs on a real
#      GPU too), the aware path's own block, a kernel still running on the default stream
#      when the call is made and cudaMallocAsync buffers (the IPC fallback) on each path
#      (test_gpu_streams), MPI_Allgather on device pointers through the interposer, and
#      the host mpi and nb programs on this GPU node;
#   3. times each path against the synchronized device-to-device copy bound
#      (agx-gpu-bench, 4 KiB to 256 MiB per rank).
# Exit status 0 when every check passed.
#
#   OUT=/some/dir scripts/gpu-check.sh [KIT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
kit=${1:-shared/gpu-kit}
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
exec > >(tee "$out/check.log") 2>&1
results=$out/results.txt
: > "$results"
say() { echo "$*" | tee -a "$results"; }
[ -f "$kit/env.sh" ] && . "$kit/env.sh"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi -L || { say "gpu-check: no GPU visible (nvidia-smi failed)"; exit 1; }
for tool in meson ninja mpirun nvcc; do
  command -v $tool >/dev/null || { say "gpu-check: $tool not found (kit: $kit)"; exit 1; }
done
# No ssh, no network: Open MPI starts local ranks only; no job may wait on a remote.
export OMPI_MCA_plm=isolated OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build=${AGX_GPU_BUILD:-build-gpu}
t0=$(date +%s)
# Catch2 (the unit tests) comes from the kit's libcatch2-dev under its pkg-config name
# catch2 (kit env.sh sets PKG_CONFIG_PATH and the sysroot).
if [ -d "$build" ]; then meson setup --reconfigure "$build" -Dcuda=enabled -Dpython=disabled
else meson setup "$build" -Dcuda=enabled -Dpython=disabled; fi
rc=$?
cp -r "$build/meson-logs" "$out/" 2>/dev/null
[ $rc -eq 0 ] || { say "gpu-check: meson setup failed"; exit 1; }
ninja -C "$build" -j 16 lib/pmpi/libagx_pmpi.so test/cuda/test_seam test/cuda/test_cuda_runtime \
  test/cuda/test_fake test/cuda/test_gpu_streams test/cuda/agx-gpu-bench test/nb/test_nb \
  test/mpi/test_allgather ||
  { say "gpu-check: build failed"; exit 1; }
say "gpu-check: build $(( $(date +%s) - t0 )) s"
mpirun=$(command -v mpirun.openmpi || command -v mpirun)
run() { timeout 120 "$mpirun" --oversubscribe --bind-to none "$@"; }
fails=0
check() {  # check NAME COMMAND...: runs, prints PASS/FAIL (and the tail on failure)
  local name=$1; shift
  local s; s=$(date +%s)
  if o=$("$@" 2>&1); then say "PASS $name ($(( $(date +%s) - s )) s)"
  else say "FAIL $name"; echo "$o" | tail -20 | tee -a "$results"; fails=$((fails + 1)); fi
}
t=$build/test/cuda
for np in 1 2 4 8; do
  check "seam np$np" run -np $np $t/test_seam
  for path in auto aware staging ipc; do
    check "runtime $path np$np" run -np $np -x AGX_CUDA_PATH=$path -x AGX_VERBOSE=1 $t/test_cuda_runtime
  done
  [ $np -gt 1 ] && check "ipc displacements np$np" run -np $np -x AGX_CUDA_PATH=ipc $t/test_fake --case=displs
  check "aware own block np$np" run -np $np -x AGX_CUDA_PATH=aware -x AGX_CUDA_AWARE_MPI=1 \
    -x AGX_ALGO=ring $t/test_fake --case=aware
  for path in auto staging ipc; do  # a kernel pending on the default stream; cudaMallocAsync
    check "streams $path np$np" run -np $np -x AGX_CUDA_PATH=$path $t/test_gpu_streams
  done
  check "interposer np$np" run -np $np -x LD_PRELOAD=$PWD/$build/lib/pmpi/libagx_pmpi.so $t/test_cuda_runtime --mpi
done
check "host nb np4" run -np 4 $build/test/nb/test_nb
check "host mpi np4" run -np 4 $build/test/mpi/test_allgather --quick
say ""
say "path     bytes/rank      agx time          D2D copy bound    agx/bound   (ranks share one GPU)"
for np in 2 4 8; do
  say "-- $np ranks"
  for path in staging aware ipc; do
    if o=$(timeout 150 "$mpirun" --oversubscribe --bind-to none -np $np -x AGX_CUDA_PATH=$path \
             -x AGX_CUDA_AWARE_MPI=${AGX_CUDA_AWARE_MPI:-0} $t/agx-gpu-bench 2>&1); then
      echo "$o" | tee -a "$results"
    else echo "$o" | tail -5 | tee -a "$results"; fails=$((fails + 1)); fi
  done
done
say "gpu-check: $fails failed, $(( $(date +%s) - t0 )) s in all"
[ $fails -eq 0 ]
