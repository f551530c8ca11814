#!/usr/bin/env bash
# The test command: installs what is missing, builds agx against Open MPI (all suites)
# and against MPICH (unit tests, a small MPI run and the interposer suite), runs them,
# and ends with one line "agx tests: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

configure() {  # configure <dir> [meson options...]
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then meson setup --reconfigure "$dir" "$@" >/dev/null
  else meson setup "$dir" "$@" >/dev/null; fi
  ninja -C "$dir"
}

status=0
configure build
meson test -C build --print-errorlogs || status=1
logs=(build/meson-logs/testlog.json)

configure build-mpich -Dmpi=mpich -Dcuda=disabled  # the CUDA build is checked once, on Open MPI
# meson test intersects test names with --suite, so the two sets run separately.
meson test -C build-mpich --print-errorlogs --logbase mpich-core \
  unit allgather-np1 allgather-np2 allgather-np3 \
  timeout-ring-abort timeout-ring-error timeout-pmpi-ring-error \
  integrity-flip-np3-1_1 integrity-flip-np5-3_1 || status=1
logs+=(build-mpich/meson-logs/mpich-core.json)
meson test -C build-mpich --print-errorlogs --logbase mpich-pmpi --suite pmpi || status=1
logs+=(build-mpich/meson-logs/mpich-pmpi.json)

python3 - "${logs[@]}" <<'PY'
import json, os, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    if not os.path.exists(path):  # that meson test run did not even start
        print(f"missing test log {path}"); failed += 1; continue
    for line in open(path):
        r = json.loads(line)["result"]
        if r in ("OK", "EXPECTEDFAIL"): passed += 1
        elif r == "SKIP": skipped += 1
        else: failed += 1
print(f"agx tests: {passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
