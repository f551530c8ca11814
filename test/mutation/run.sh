#!/usr/bin/env bash
# Mutation runs: do the suites notice a deliberately broken executor or planner?
#
#   test/mutation/run.sh [--no-baseline] [MUTATION...]     # default: every *.patch here
#
# Copies the working tree (tracked and untracked, not ignored files) to
# $AGX_MUTATION_DIR (default build-mutation/ in the tree; its src/ is the copy, build/
# its build, -Dcuda=disabled), builds it once and runs the suites unmutated (the
# baseline: all must pass). Then, for each mutation, it applies the patch to the copy,
# rebuilds (only the patched file recompiles), runs the same suites, reverts the patch
# and prints one line per mutation with the suites that caught it (a suite catches a
# mutation when any of its tests fails):
#
#   unit   meson test unit (symbolic validation of every schedule, message cuts)
#   mpi    allgather-np2, allgather-np3, allgather-np5 (the full C++ matrix)
#   pmpi   meson test --suite pmpi (C, Fortran 77/90 programs under LD_PRELOAD)
#
# The patches (test/mutation/*.patch, `patch -p1` against the source root):
#   drop-block          message planning and the compiled descriptors skip the last
#                       block of every multi-block span
#   swap-blocks         block_address and the compiled descriptors swap the places of
#                       blocks 1 and 2 (N > 2)
#   skip-own-copy       the engine never makes a schedule's copies (the own block, out
#                       of place)
#   planner-drop-block  distance_halving stops passing on the last block it holds
#   auto-runs-other     an automatic call runs ring (or direct) instead of what the
#                       selector chose: right data, wrong algorithm
# Results of the last run: docs/reliability.md ("Mutation runs"). Exit status: 0 when
# every mutation was caught by at least one suite and the baseline passed, 1 otherwise.
# Cost: one build without CUDA (libagx, the interposer and the suites' programs), then per mutation one recompiled file and the three
# suites (about 3-6 minutes each on 2 cores, more when the machine is busy).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/test/mutation"
work="${AGX_MUTATION_DIR:-$root/build-mutation}"
baseline=1
if [ "${1:-}" = "--no-baseline" ]; then baseline=0; shift; fi
mutations=("$@")
if [ ${#mutations[@]} -eq 0 ]; then
  for p in "$here"/*.patch; do mutations+=("$(basename "$p" .patch)"); done
fi

mkdir -p "$work/src"
# The copy: files keep their times, so an unchanged file is not rebuilt.
(cd "$root" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$work/src"
# A run that stopped between patch and revert leaves objects of a mutated file that the
# copy's older time would not replace: every file a patch touches is recompiled once.
for p in "$here"/*.patch; do
  for f in $(grep '^+++ ' "$p" | sed 's|^+++ b/||; s|\s.*||'); do touch "$work/src/$f"; done
done
if [ ! -f "$work/build/build.ninja" ]; then
  meson setup "$work/build" "$work/src" -Dcuda=disabled >"$work/setup.log" 2>&1 ||
    { cat "$work/setup.log"; exit 1; }
fi

# Everything is built (the pmpi suite runs a dozen programs; a list of them went stale
# once, and the baseline then failed on a program that was never built). After the first
# build a mutation recompiles its one file and relinks.

# run_suites LABEL: prints the suites with a failing test ("-" when none failed).
run_suites() {
  local label=$1 caught=()
  ninja -C "$work/build" -j "${AGX_MUTATION_JOBS:-2}" >"$work/$label.build.log" 2>&1 ||
    { echo "build-failed"; return; }
  local mt=(meson test -C "$work/build" --no-rebuild --timeout-multiplier 0.3)
  "${mt[@]}" --logbase "$label-unit" unit >/dev/null 2>&1 || caught+=(unit)
  "${mt[@]}" --logbase "$label-mpi" allgather-np2 allgather-np3 allgather-np5 >/dev/null 2>&1 ||
    caught+=(mpi)
  "${mt[@]}" --logbase "$label-pmpi" --suite pmpi >/dev/null 2>&1 || caught+=(pmpi)
  if [ ${#caught[@]} -eq 0 ]; then echo "-"; else echo "${caught[*]}"; fi
}

status=0
if [ $baseline -eq 1 ]; then
  result=$(run_suites baseline)
  echo "baseline (no mutation): failing suites: $result"
  [ "$result" = "-" ] || { echo "the unmutated build fails: mutation results would mean nothing"; exit 1; }
fi
for m in "${mutations[@]}"; do
  patch_file="$here/$m.patch"
  files=$(grep '^+++ ' "$patch_file" | sed 's|^+++ b/||; s|\s.*||')
  if ! (cd "$work/src" && patch -p1 --quiet --forward <"$patch_file"); then
    echo "$m: the patch does not apply to this tree (update test/mutation/$m.patch)"
    status=1
    continue
  fi
  result=$(run_suites "$m")
  (cd "$work/src" && patch -p1 --quiet -R <"$patch_file")
  for f in $files; do touch "$work/src/$f"; done  # reverted: newer than its object again
  echo "$m: caught by: $result"
  [ "$result" = "-" ] && status=1
  [ "$result" = "build-failed" ] && status=1
done
exit $status
