#!/usr/bin/env bash
# The test command: installs what is missing, builds agx three times, runs the tests, and
# ends with one line "N passed, N failed, N skipped". What runs where, with its
# serial seconds on a 2-core machine (from the meson and ninja logs of a run on a shared
# one, less what this layout leaves out; the whole script 1693 s in CI while every test
# ran alone, 1368 s on a fresh clone here since they run two at a time):
#   build        Open MPI, -Dwerror=true, CUDA where nvcc is: every target (about 820 s of
#                compiling); every suite but cluster, two tests at a time (about 480 s of
#                wall time, 930 s of test time), then the cluster suite alone (about 70 s). The MPI matrix: whole at 1-5 ranks, whole on the world
#                communicator and quick on the others at 7, 8 and 11 (test/mpi/meson.build).
#   build-mpich  MPICH, -Dwerror=true, no CUDA: libagx, the interposer and the programs of
#                its tests only (about 480 s; the tools and the unit tests, which use no
#                MPI, are checked on Open MPI, and scripts/build-matrix.sh builds every
#                target against MPICH); the matrix at 1-3 ranks, timeouts, integrity (about
#                50 s), the pmpi and faults suites (about 160 s), three cluster tests
#                across network-namespace nodes (about 60 s).
#   build-asan   address and undefined-behaviour sanitizers, -O1, no werror: libagx and the
#                programs of its runs only (about 590 s); the unit tests, the
#                matrix at 1-3 ranks, split messages, nonblocking, the soak, and the
#                interposer's calls that outlive their communicator (MPI_Iallgather,
#                MPI_Comm_free, MPI_Wait; libasan preloaded ahead of the interposer,
#                test/pmpi/meson.build) (about 120 s); its unit proofs stop at 256 ranks
#                (AGX_TEST_MAX_RANKS; about 20 s instead of 140 s).
# Warnings are errors here (-Dwerror=true on the Open MPI and MPICH builds), not in the
# default options users build with; a configure-only check (about 5 s) makes sure those
# defaults stay free of werror. The full matrix of build combinations (release/debug,
# CUDA or not, sanitizers, Open MPI/MPICH; about an hour) is scripts/build-matrix.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

setup() {  # setup <dir> [meson options...]
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then meson setup --reconfigure "$dir" "$@" >/dev/null
  else meson setup "$dir" "$@" >/dev/null; fi
}
# test_targets <dir> [NAME...] [--suite SUITE...]: what ninja must build for those tests
# (each test's program and its `depends`, from meson's introspection); a name that is no
# test of <dir> is an error, so that a renamed test cannot drop out unseen.
test_targets() {
  python3 - "$@" <<'PY'
import json, os, subprocess, sys
build, names, suites, args = sys.argv[1], set(), set(), sys.argv[2:]
while args:
    a = args.pop(0)
    if a == "--suite": suites.add(args.pop(0))
    else: names.add(a)
intro = lambda what: json.loads(subprocess.check_output(["meson", "introspect", what, build]))
tests, targets = intro("--tests"), {t["id"]: t for t in intro("--targets")}
missing = names - {t["name"] for t in tests}
if missing: sys.exit(f"test_targets: no such test in {build}: {' '.join(sorted(missing))}")
files = set()
for t in tests:
    if t["name"] in names or suites & {s.split(":")[-1] for s in t["suite"]}:
        for d in t["depends"]:
            files.update(os.path.relpath(f, build) for f in targets[d]["filename"])
print("\n".join(sorted(files)))
PY
}

status=0
setup build -Dwerror=true
ninja -C build  # everything: each program compiles warning-free against Open MPI, with CUDA
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

# MPICH: libagx, the interposer and the programs of its tests only (the tools and the unit
# tests, which use no MPI, are built and run against Open MPI above; scripts/build-matrix.sh
# builds everything against MPICH).
setup build-mpich -Dmpi=mpich -Dcuda=disabled -Dwerror=true  # CUDA is checked once, on Open MPI
mpich_core=(allgather-np1 allgather-np2 allgather-np3
            timeout-ring-abort timeout-ring-error timeout-pmpi-ring-error
            integrity-flip-np3-1_1 integrity-flip-np5-3_1)
# MPICH across network-namespace nodes (docs/cluster.md; about 60 s): hydra's launch on
# 3x2, the matrix on 3x1, the interposer on 2 nodes (the 2x2 matrix is left to
# `meson test -C build-mpich --suite cluster`).
mpich_cluster=(cluster-mpich-launch-3x2 cluster-mpich-matrix-3x1 cluster-mpich-pmpi-c-auto)
targets=$(test_targets build-mpich "${mpich_core[@]}" "${mpich_cluster[@]}" --suite pmpi --suite faults)
ninja -C build-mpich $targets  # (paths without spaces; an empty list would build everything)
# meson test intersects test names with --suite, so the two sets run separately.
meson test -C build-mpich --no-rebuild --print-errorlogs --logbase mpich-core \
  "${mpich_core[@]}" || status=1
logs+=(build-mpich/meson-logs/mpich-core.json)
meson test -C build-mpich --no-rebuild --print-errorlogs --logbase mpich-pmpi \
  --suite pmpi --suite faults || status=1
logs+=(build-mpich/meson-logs/mpich-pmpi.json)
meson test -C build-mpich --no-rebuild --print-errorlogs --logbase mpich-cluster \
  "${mpich_cluster[@]}" || status=1
logs+=(build-mpich/meson-logs/mpich-cluster.json)

# The sanitizer build: only libagx and the programs of the runs below (-O1; warnings are
# not errors here, GCC 12 warns falsely under the sanitizers), as a unity build (meson's
# -Dunity=on: a few sources per compiler run, 211 s instead of 243 s here; not under
# werror, where -Wsubobject-linkage fires on sources included into one unit, silenced
# here). The Open MPI
# and MPICH builds compile every source alone, so a source that misses an include fails
# there. A UB report stops its test
# (halt_on_error), as does any ASan error. Leak checking needs whole malloc stacks to
# suppress Open MPI's own leaks (test/sanitizers/lsan.supp; fast_unwind_on_malloc=0, too
# slow for the allocation-heavy unit tests, which run without it) and Open MPI's
# components still loaded at exit (mca_base_component_disable_dlclose).
asan_options=(-Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled -Dwerror=false
              -Doptimization=1 -Dsoak_seconds=10 "-Dcpp_args=['-Wno-maybe-uninitialized','-Wno-subobject-linkage']" -Dunity=on)
setup build-asan "${asan_options[@]}"
asan_mpi=(allgather-np1 allgather-np2 allgather-np3 allgather-split-messages nb-np3 nb-setup-np3-nodes-1
          soak-np4 soak-np5-virtual-nodes
          pmpi-comm-free-auto pmpi-comm-free-ring pmpi-comm-free-shared_memory)
targets=$(test_targets build-asan unit "${asan_mpi[@]}")
ninja -C build-asan $targets
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# (the unit proofs up to 256 ranks: those up to 1024 took 90% of the run, about 125 s;
# the Open MPI build proves them in full)
AGX_TEST_MAX_RANKS=256 meson test -C build-asan --no-rebuild --print-errorlogs --logbase asan-unit unit || status=1
logs+=(build-asan/meson-logs/asan-unit.json)
ASAN_OPTIONS=fast_unwind_on_malloc=0 OMPI_MCA_mca_base_component_disable_dlclose=1 \
LSAN_OPTIONS=suppressions=$PWD/test/sanitizers/lsan.supp:print_suppressions=0 \
  meson test -C build-asan --no-rebuild --print-errorlogs --logbase asan-mpi "${asan_mpi[@]}" || status=1
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
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
