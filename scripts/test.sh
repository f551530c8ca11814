#!/usr/bin/env bash
# The test command: installs what is missing, builds agx against Open MPI (all suites),
# against MPICH (unit tests, a small MPI run, the interposer and faults suites) and with the
# address and undefined-behaviour sanitizers (unit tests, the MPI matrix at 1-3 ranks,
# split messages, the soak), runs them, and ends with one line
# "agx tests: N passed, N failed, N skipped".
# Warnings are errors here (-Dwerror=true on the Open MPI and MPICH builds), not in the
# default options users build with; a configure-only check (about 5 s) makes sure those
# defaults stay free of werror. The full matrix of build combinations (release/debug,
# CUDA or not, sanitizers, Open MPI/MPICH; about an hour) is scripts/build-matrix.sh.
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
configure build -Dwerror=true
# (own log names: a `meson test` run by hand at the same time writes testlog.json)
meson test -C build --print-errorlogs --logbase openmpi --no-suite cluster || status=1  # every other suite, python included
logs=(build/meson-logs/openmpi.json)
# The cluster suite (test/cluster, docs/cluster.md; about 2-3 minutes): agx across 2-4
# network-namespace nodes over TCP; its tests SKIP with the reason where namespaces are
# not allowed; each fails when its cluster (namespaces, hosts files, agx segments) is not
# gone afterwards.
meson test -C build --print-errorlogs --logbase cluster --suite cluster || status=1
logs+=(build/meson-logs/cluster.json)

# What a user configures (the release build with sanitizers that GCC 12's false
# -Wmaybe-uninitialized in <regex> broke while werror was a default): no werror.
rm -rf build-defaults
meson setup build-defaults --buildtype=release -Db_sanitize=address,undefined >/dev/null
if meson introspect --buildoptions build-defaults |
   python3 -c 'import json,sys; sys.exit(0 if not {o["name"]: o["value"] for o in json.load(sys.stdin)}["werror"] else 1)'
then result=OK; echo "build-defaults: werror is off in the default options"
else result=FAIL; echo "FAIL: werror is on in the default options users build with"; status=1; fi
rm -rf build-defaults
echo "{\"result\": \"$result\"}" > build/meson-logs/build-defaults.json  # counted below
logs+=(build/meson-logs/build-defaults.json)

configure build-mpich -Dmpi=mpich -Dcuda=disabled -Dwerror=true  # CUDA is checked once, on Open MPI
# meson test intersects test names with --suite, so the two sets run separately.
meson test -C build-mpich --print-errorlogs --logbase mpich-core \
  unit allgather-np1 allgather-np2 allgather-np3 \
  timeout-ring-abort timeout-ring-error timeout-pmpi-ring-error \
  integrity-flip-np3-1_1 integrity-flip-np5-3_1 || status=1
logs+=(build-mpich/meson-logs/mpich-core.json)
meson test -C build-mpich --print-errorlogs --logbase mpich-pmpi --suite pmpi --suite faults || status=1
logs+=(build-mpich/meson-logs/mpich-pmpi.json)

# The sanitizer build: only libagx and the programs of the runs below (-O1; warnings are
# not errors here, GCC 12 warns falsely under the sanitizers). A UB report stops its test
# (halt_on_error), as does any ASan error. Leak checking needs whole malloc stacks to
# suppress Open MPI's own leaks (test/sanitizers/lsan.supp; fast_unwind_on_malloc=0, too
# slow for the allocation-heavy unit tests, which run without it) and Open MPI's
# components still loaded at exit (mca_base_component_disable_dlclose).
asan_options=(-Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled -Dwerror=false
              -Doptimization=1 -Dsoak_seconds=10 -Dcpp_args=-Wno-maybe-uninitialized)
if [ -f build-asan/build.ninja ]; then meson setup --reconfigure build-asan "${asan_options[@]}" >/dev/null
else meson setup build-asan "${asan_options[@]}" >/dev/null; fi
ninja -C build-asan test/unit/test_unit test/mpi/test_allgather test/soak/soak test/nb/test_nb
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
meson test -C build-asan --no-rebuild --print-errorlogs --logbase asan-unit unit || status=1
logs+=(build-asan/meson-logs/asan-unit.json)
ASAN_OPTIONS=fast_unwind_on_malloc=0 OMPI_MCA_mca_base_component_disable_dlclose=1 \
LSAN_OPTIONS=suppressions=$PWD/test/sanitizers/lsan.supp:print_suppressions=0 \
  meson test -C build-asan --no-rebuild --print-errorlogs --logbase asan-mpi \
  allgather-np1 allgather-np2 allgather-np3 allgather-split-messages nb-np3 \
  soak-np4 soak-np5-virtual-nodes || status=1
logs+=(build-asan/meson-logs/asan-mpi.json)

python3 - "${logs[@]}" <<'PY'
import json, os, sys
passed = failed = skipped = 0
failures = []
for path in sys.argv[1:]:
    if not os.path.exists(path):  # that meson test run did not even start
        failures.append(f"{path}: missing (that run did not start)"); failed += 1; continue
    for n, line in enumerate(open(path, errors="replace"), 1):
        try:
            t = json.loads(line)
        except ValueError:  # a damaged log counts as a failure, never as a pass
            failed += 1; failures.append(f"{path}: line {n} is not a test record"); continue
        r = t["result"]
        if r in ("OK", "EXPECTEDFAIL"): passed += 1
        elif r == "SKIP": skipped += 1
        else:
            failed += 1
            failures.append(f"{path}: {t['name']} {r} after {t.get('duration', 0):.0f} s")
for f in failures:  # named last, so that a log's tail says what failed
    print("failed:", f)
print(f"agx tests: {passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
