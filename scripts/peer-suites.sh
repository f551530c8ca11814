#!/usr/bin/env bash
# The nonblocking and persistent all-gather tests of suites agx did not write, run under
# the interposer (libagx_pmpi.so preloaded, AGX_SUMMARY=1), with the count of calls agx
# served and passed to the MPI library (docs/nonblocking.md, "Peer suites"):
#   Intel MPI Benchmarks  IMB-NBC Iallgather Iallgatherv             (Open MPI, N = 2 3 4)
#   mpi4py 3.1.4          test_cco_nb_buf.py, test_cco_nb_vec.py     (Open MPI, N = 2 3 4)
#   MPICH's test suite    coll/nonblocking, nonblocking2, nonblocking3, p_allgather,
#                         p_allgatherv                                (MPICH, N = 1 2 3 4)
# Each is taken from a git mirror (bare or not) and built outside this repository, in
# --cache (default ~/.cache/agx/peer-suites); nothing of it is kept here.
#
#   scripts/peer-suites.sh [--imb GITDIR] [--mpi4py GITDIR] [--mpich GITDIR] [--cache DIR]
#
# Defaults: /work/.mirror/{intel+mpi-benchmarks,mpi4py+mpi4py,pmodels+mpich}/repo where
# they exist (a suite without its source is reported as not run). Needs the interposer
# built: build/lib/pmpi/libagx_pmpi.so (Open MPI) and build-mpich/lib/pmpi/libagx_pmpi.so.
# Exit status 1 when a test failed or agx passed a call to the MPI library.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
imb=/work/.mirror/intel+mpi-benchmarks/repo mpi4py=/work/.mirror/mpi4py+mpi4py/repo
mpich=/work/.mirror/pmodels+mpich/repo cache=${HOME:-/tmp}/.cache/agx/peer-suites
while [ $# -gt 0 ]; do
  case $1 in
    --imb) imb=$2; shift 2 ;; --mpi4py) mpi4py=$2; shift 2 ;; --mpich) mpich=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    *) echo "peer-suites.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ompi_pmpi=$root/build/lib/pmpi/libagx_pmpi.so mpich_pmpi=$root/build-mpich/lib/pmpi/libagx_pmpi.so
status=0
# export <gitdir> <rev> <dest> [paths...]: a tree from a bare or non-bare git directory
export_tree() {
  local g=$1 rev=$2 dest=$3; shift 3
  [ -d "$g/.git" ] && g=$g/.git
  rm -rf "$dest" && mkdir -p "$dest"
  git --git-dir="$g" archive "$rev" "$@" | tar x -C "$dest"
}
# report <name> <output>: the test's verdict and AGX_SUMMARY's counts, one line
report() {
  local name=$1 out=$2 verdict served passed
  verdict=$(echo "$out" | { grep -E "No Errors|^OK|FAILED|Found [0-9]+ errors|ERROR" || true; } | head -1 | sed 's/^ *//')
  served=$(echo "$out" | awk '/agx summary: [a-z_:=0-9]+ +[0-9]/ {s += $4} END {print s + 0}')  # (rows: bruck:k=2 ...)
  passed=$(echo "$out" | awk '/agx summary: passed-to-MPI/ {print $4}')
  [ -z "$verdict" ] && echo "$out" | grep -q "Benchmarking" && verdict="ran"  # IMB: no verdict line
  echo "$name: ${verdict:-no verdict} | agx served $served, passed to the MPI library ${passed:-?}"
  case "$verdict" in "No Errors"|OK|ran) ;; *) status=1 ;; esac
  [ "${passed:-x}" = 0 ] || status=1
  return 0
}

if [ -d "$imb" ]; then
  export_tree "$imb" HEAD "$cache/imb"
  make -s -C "$cache/imb" IMB-NBC CC=mpicc.openmpi CXX=mpicxx.openmpi CPPFLAGS=-DOMPI_SKIP_MPICXX=1 \
    CXXFLAGS="-O2 -Wno-error" CFLAGS="-O2 -Wno-error" >/dev/null 2>&1
  for n in 2 3 4; do
    out=$(timeout 600 mpirun.openmpi --oversubscribe -np $n -x LD_PRELOAD="$ompi_pmpi" -x AGX_SUMMARY=1 \
      "$cache/imb/IMB-NBC" Iallgather Iallgatherv -npmin $n -msglog 0:20 -iter 200 -time 1 2>&1) || status=1
    report "IMB-NBC Iallgather Iallgatherv N=$n" "$out"
  done
else echo "IMB: not run (no source at $imb)"; fi

if [ -d "$mpi4py" ]; then
  version=$(/usr/bin/python3 -c 'import mpi4py; print(mpi4py.__version__)')
  export_tree "$mpi4py" "$version" "$cache/mpi4py" test
  for t in test_cco_nb_buf test_cco_nb_vec; do
    for n in 2 3 4; do
      out=$(cd "$cache/mpi4py/test" && timeout 600 mpirun.openmpi --oversubscribe -np $n \
        -x LD_PRELOAD="$ompi_pmpi" -x AGX_SUMMARY=1 /usr/bin/python3 $t.py 2>&1) || status=1
      report "mpi4py $version $t N=$n" "$out"
    done
  done
else echo "mpi4py: not run (no source at $mpi4py)"; fi

if [ -d "$mpich" ]; then
  d=$cache/mpich/test/mpi
  export_tree "$mpich" HEAD "$cache/mpich" test/mpi/coll test/mpi/util test/mpi/include
  # What MPICH's configure would write: the headers it generates, and no GPU support.
  printf '#define HAVE_STDLIB_H 1\n#define HAVE_STRING_H 1\n#define HAVE_UNISTD_H 1\n#define HAVE_SYS_TIME_H 1\n#define HAVE_SYS_RESOURCE_H 1\n#define HAVE_STDARG_H 1\n' > "$d/include/mpitestconf.h"
  : > "$d/include/mtest_mpix.h"
  printf 'void MTest_init_visibility_gpu(void) {}\nvoid MTest_finalize_gpu(void) {}\n' > "$d/util/no_gpu.c"
  common=("$d/util/mtest.c" "$d/util/mtest_single.c" "$d/util/no_gpu.c")
  for t in nonblocking nonblocking2 nonblocking3 p_allgather p_allgatherv; do
    extra=()
    grep -q '^int main' "$d/coll/$t.c" || extra=("$d/util/run_mpitests.c")
    mpicc.mpich -O1 -DTHREAD_PACKAGE_NAME=THREAD_PACKAGE_NONE -I"$d/include" -o "$cache/mpich/$t" \
      "$d/coll/$t.c" "${common[@]}" "${extra[@]}"
    for n in 1 2 3 4; do
      out=$(timeout 600 mpiexec.mpich -np $n -genv LD_PRELOAD "$mpich_pmpi" -genv AGX_SUMMARY 1 \
        "$cache/mpich/$t" 2>&1) || status=1
      report "MPICH coll/$t N=$n" "$out"
    done
  done
else echo "MPICH test suite: not run (no source at $mpich)"; fi
exit $status
