#!/bin/bash
# The GPU check (docs/gpu.md), for one node with a GPU, the CUDA toolkit and driver, and
# no network or package access: only a copy of the working tree (with the kit that
# scripts/gpu-prepare.sh made, KIT_DIR, default shared/gpu-kit: its debs/ and env.sh
# suffice, about 28 MiB; they are unpacked here with dpkg -x when root/ is missing).
# One run, unattended, inside GPU_CHECK_BUDGET seconds (default 540, for a 10-minute
# limit; every run's timeout is cut to what is left, and what no longer fits is
# reported as SKIP). Every result goes to $OUT (default ./gpu-check-out): check.log
# (everything, meson's and ninja's output included), results.txt (PASS/FAIL/SKIP lines
# and the timing table), logs/NAME.log (each run's whole output), meson-logs/.
#   1. builds with -Dcuda=enabled, only what the check runs, -j 16;
#   2. correctness at 2, 4, 1 and 8 ranks sharing the GPU (most telling first): the
#      runtime test with every path forced and auto (device, managed, pinned, mixed
#      host/device; float, __half, __nv_bfloat16; out of place, in place, v, start,
#      plan), per-rank displacements and sub-allocation offsets on the IPC path
#      (test_fake --case=displs runs on a real GPU too), the aware path's own block,
#      nonblocking starts that must not wait for the peers (--case=progress) and what
#      a call reports it ran (--case=report), a kernel still running on the default
#      stream when the call is made and cudaMallocAsync buffers (the IPC fallback) on
#      each path (test_gpu_streams), MPI_Allgather on device pointers through the
#      interposer; then the host mpi and nb programs on this GPU node;
#   3. times each path against the synchronized device-to-device copy bound
#      (agx-gpu-bench, 4 KiB to 256 MiB per rank) at 2, 4 and 8 ranks.
# Exit status 0 when every check ran and passed.
#
#   OUT=/some/dir scripts/gpu-check.sh [KIT_DIR]
#
# GPU_CHECK_DRY=1 runs the same steps without a GPU, under test/cuda's fake_cuda
# (preloaded; kernels skipped): it checks the script itself, not CUDA. AGX_GPU_BUILD
# names the build directory (default build-gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
kit=${1:-shared/gpu-kit}
out=${OUT:-$PWD/gpu-check-out}
budget=${GPU_CHECK_BUDGET:-540}
dry=${GPU_CHECK_DRY:-0}
t0=$(date +%s)
mkdir -p "$out/logs"
exec > >(tee "$out/check.log") 2>&1
results=$out/results.txt
: > "$results"
say() { echo "$*" | tee -a "$results"; }
left() { echo $(( budget - ($(date +%s) - t0) )); }
# The kit: unpack the .deb files on this node when only they came along.
if [ ! -d "$kit/root/usr" ] && compgen -G "$kit/debs/*.deb" >/dev/null; then
  echo "gpu-check: unpacking $(ls "$kit"/debs/*.deb | wc -l) .deb files into $kit/root"
  mkdir -p "$kit/root"
  for d in "$kit"/debs/*.deb; do dpkg -x "$d" "$kit/root" || { say "gpu-check: dpkg -x $d failed"; exit 1; }; done
fi
[ -f "$kit/env.sh" ] && . "$kit/env.sh"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
if [ "$dry" = 1 ]; then say "gpu-check: DRY RUN under fake_cuda (no GPU used; checks the script only)"
else nvidia-smi -L || { say "gpu-check: no GPU visible (nvidia-smi failed)"; exit 1; }; fi
for tool in meson ninja mpirun nvcc timeout; do
  command -v $tool >/dev/null || { say "gpu-check: $tool not found (kit: $kit)"; exit 1; }
done
# No ssh, no network: Open MPI starts local ranks only, over shared memory.
export OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build=${AGX_GPU_BUILD:-build-gpu}
# Catch2 (the unit tests, not run here) is optional: without it meson leaves them out.
opts=(-Dcuda=enabled -Dpython=disabled)
if [ -d "$build" ]; then timeout "$(left)" meson setup --reconfigure "$build" "${opts[@]}"
else timeout "$(left)" meson setup "$build" "${opts[@]}"; fi
rc=$?
cp -r "$build/meson-logs" "$out/" 2>/dev/null
[ $rc -eq 0 ] || { say "gpu-check: meson setup failed (exit $rc)"; exit 1; }
timeout "$(left)" ninja -C "$build" -j 16 lib/pmpi/libagx_pmpi.so test/cuda/test_seam \
  test/cuda/test_cuda_runtime test/cuda/test_fake test/cuda/test_gpu_streams \
  test/cuda/agx-gpu-bench test/cuda/libfake_cuda.so test/nb/test_nb test/mpi/test_allgather ||
  { say "gpu-check: build failed"; exit 1; }
say "gpu-check: build $(( $(date +%s) - t0 )) s"
mpirun=$(command -v mpirun.openmpi || command -v mpirun)
t=$build/test/cuda
fake=()
nokernel=()
pmpi=$PWD/$build/lib/pmpi/libagx_pmpi.so
if [ "$dry" = 1 ]; then
  fake=(-x LD_PRELOAD=$PWD/$t/libfake_cuda.so -x FAKE_CUDA_DEVICES=1)
  nokernel=(--no-kernel)
  pmpi=$PWD/$t/libfake_cuda.so:$pmpi
fi
fails=0
skips=0
# run LIMIT ARGS...: mpirun with the smaller of LIMIT and what is left of the budget.
run() {
  local limit=$1; shift
  local l; l=$(left)
  [ "$l" -lt "$limit" ] && limit=$l
  timeout "$limit" "$mpirun" --oversubscribe --bind-to none "${fake[@]}" "$@"
}
check() {  # check NAME COMMAND...: PASS/FAIL (the tail on failure), SKIP past the budget
  local name=$1; shift
  if [ "$(left)" -lt 15 ]; then say "SKIP $name (budget spent)"; skips=$((skips + 1)); return; fi
  local s; s=$(date +%s)
  local log=$out/logs/${name// /_}.log
  if "$@" > "$log" 2>&1; then say "PASS $name ($(( $(date +%s) - s )) s)"
  else
    say "FAIL $name (exit $?, $(( $(date +%s) - s )) s)"
    tail -20 "$log" | tee -a "$results"
    fails=$((fails + 1))
  fi
}
for np in 2 4 1 8; do
  check "seam np$np" run 60 -np $np $t/test_seam
  for path in auto aware staging ipc; do
    check "runtime $path np$np" run 90 -np $np -x AGX_CUDA_PATH=$path -x AGX_VERBOSE=1 $t/test_cuda_runtime
  done
  if [ $np -gt 1 ]; then
    check "ipc displacements np$np" run 60 -np $np -x AGX_CUDA_PATH=ipc $t/test_fake --case=displs
    for path in staging ipc; do
      check "progress $path np$np" run 60 -np $np -x AGX_CUDA_PATH=$path $t/test_fake --case=progress
    done
  fi
  check "aware own block np$np" run 60 -np $np -x AGX_CUDA_PATH=aware -x AGX_CUDA_AWARE_MPI=1 \
    -x AGX_ALGO=ring $t/test_fake --case=aware
  check "report np$np" run 60 -np $np -x AGX_CUDA_PATH=aware -x AGX_CUDA_AWARE_MPI=1 $t/test_fake --case=report
  for path in auto staging ipc; do  # a kernel pending on the default stream; cudaMallocAsync
    check "streams $path np$np" run 60 -np $np -x AGX_CUDA_PATH=$path $t/test_gpu_streams "${nokernel[@]}"
  done
  check "interposer np$np" run 60 -np $np -x LD_PRELOAD=$pmpi $t/test_cuda_runtime --mpi
done
check "host nb np4" run 120 -np 4 $build/test/nb/test_nb
check "host mpi np4" run 120 -np 4 $build/test/mpi/test_allgather --quick
say ""
say "path     bytes/rank      agx time          D2D copy bound    agx/bound   (ranks share one GPU)"
for np in 2 4 8; do
  say "-- $np ranks"
  for path in staging aware ipc; do
    name="bench $path np$np"
    if [ "$(left)" -lt 30 ]; then say "SKIP $name (budget spent)"; skips=$((skips + 1)); continue; fi
    if run 120 -np $np -x AGX_CUDA_PATH=$path -x AGX_CUDA_AWARE_MPI=${AGX_CUDA_AWARE_MPI:-0} \
         $t/agx-gpu-bench > "$out/logs/${name// /_}.log" 2>&1; then
      tee -a "$results" < "$out/logs/${name// /_}.log"
    else
      say "FAIL $name"; tail -5 "$out/logs/${name// /_}.log" | tee -a "$results"; fails=$((fails + 1))
    fi
  done
done
cp -r "$build/meson-logs" "$out/" 2>/dev/null
say "gpu-check: $fails failed, $skips skipped, $(( $(date +%s) - t0 )) s in all"
[ $fails -eq 0 ] && [ $skips -eq 0 ]
