#!/usr/bin/env bash
# The documented build combinations, each configured the way a user would (no -Dwerror),
# built completely, and tested with `meson test --suite unit` (the symbolic schedule
# tests and the docs check), one after another:
#
#   release-openmpi-cuda      --buildtype=release                       (CUDA when nvcc is found)
#   release-openmpi-nocuda    --buildtype=release -Dcuda=disabled
#   debug-openmpi-cuda        --buildtype=debug
#   release-mpich-nocuda      --buildtype=release -Dmpi=mpich -Dcuda=disabled
#   debug-mpich-cuda          --buildtype=debug -Dmpi=mpich
#   release-sanitizers        --buildtype=release -Db_sanitize=address,undefined
#   debug-sanitizers-mpich    --buildtype=debug -Db_sanitize=address,undefined -Dmpi=mpich -Dcuda=disabled
#
#   scripts/build-matrix.sh [NAME...]        # default: all of them; build dirs build-matrix/NAME
#
# "cuda" combinations build lib/cuda's CUDA code where nvcc and cudart are installed (no
# GPU needed: the unit tests never touch one) and the host-only stand-in elsewhere; each
# line says which it got. AGX_MATRIX_JOBS sets ninja's -j (default: ninja's own choice).
# Cost: seven full builds, about 5-12 minutes each on 2 cores (CUDA and sanitizer builds
# are the slow ones), so about an hour; scripts/test.sh only checks that the default
# options carry no werror. Ends with one line per combination: configure / build / unit
# result. Exit status 0 when every combination configured, built and passed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
declare -A options=(
  [release-openmpi-cuda]="--buildtype=release"
  [release-openmpi-nocuda]="--buildtype=release -Dcuda=disabled"
  [debug-openmpi-cuda]="--buildtype=debug"
  [release-mpich-nocuda]="--buildtype=release -Dmpi=mpich -Dcuda=disabled"
  [debug-mpich-cuda]="--buildtype=debug -Dmpi=mpich"
  [release-sanitizers]="--buildtype=release -Db_sanitize=address,undefined"
  [debug-sanitizers-mpich]="--buildtype=debug -Db_sanitize=address,undefined -Dmpi=mpich -Dcuda=disabled"
)
order=(release-openmpi-cuda release-openmpi-nocuda debug-openmpi-cuda release-mpich-nocuda
       debug-mpich-cuda release-sanitizers debug-sanitizers-mpich)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${order[@]}")
jobs=()
[ -n "${AGX_MATRIX_JOBS:-}" ] && jobs=(-j "$AGX_MATRIX_JOBS")

status=0
summary=()
for name in "${names[@]}"; do
  if [ -z "${options[$name]+set}" ]; then
    echo "build-matrix: unknown combination '$name' (known: ${order[*]})" >&2
    exit 2
  fi
  dir="build-matrix/$name"
  start=$SECONDS
  # shellcheck disable=SC2086  # the options are words
  if [ -f "$dir/build.ninja" ]; then meson setup --reconfigure "$dir" ${options[$name]} >"$dir.setup.log" 2>&1
  else mkdir -p build-matrix && meson setup "$dir" ${options[$name]} >"$dir.setup.log" 2>&1; fi
  if [ $? -ne 0 ]; then
    summary+=("$name: configure FAILED (see $dir.setup.log)"); status=1; continue
  fi
  cuda="no CUDA"
  grep -q "nvcc" "$dir/build.ninja" && cuda="CUDA (nvcc)"
  if ! ninja -C "$dir" "${jobs[@]}" >"$dir.build.log" 2>&1; then
    summary+=("$name [$cuda]: build FAILED (see $dir.build.log)"); status=1; continue
  fi
  warnings=$(grep -c "warning:" "$dir.build.log" || true)
  # Debug builds run the symbolic proofs (up to 1024 ranks) unoptimized: on a loaded
  # machine that exceeds the unit test's 300 s, so the matrix allows three times that.
  if meson test -C "$dir" --no-rebuild --suite unit --timeout-multiplier 3 >"$dir.test.log" 2>&1; then unit="unit passed"
  else unit="unit FAILED (see $dir/meson-logs/testlog.txt)"; status=1; fi
  summary+=("$name [$cuda]: configured, built ($warnings compiler warnings), $unit, $((SECONDS - start)) s")
  echo "${summary[-1]}"
done
echo "build matrix:"
printf '  %s\n' "${summary[@]}"
exit $status
