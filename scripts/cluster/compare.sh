#!/usr/bin/env bash
# agx against the MPI libraries' all-gathers across the cluster (docs/cluster.md,
# docs/results.md): per link profile one cluster of 4 nodes (scripts/cluster/cluster.sh),
# and per shape three agx-bench runs, each with the MPI library's own MPI_Allgather and
# agx's drop-in path (libagx_pmpi.so preloaded) in the same run, out of place:
#   ompi   Open MPI's default all-gather (coll/tuned)
#   han    Open MPI's coll/han (--mca coll_han_priority 100)
#   mpich  MPICH's default (hydra across the nodes; the MPICH build's agx-bench)
# The report (scripts/cluster/compare-report.py) has a table per profile and shape: each
# library's time, agx's ratio to it, and the link bound (the bytes a node must receive
# over its link divided by the link's rate); a PNG per profile. The cluster is removed
# afterwards, also on failure or a signal.
#
#   scripts/cluster/compare.sh [-p 1g,10g] [--shapes 4x1,4x2,2x3] [--max-bytes B]
#                              [--passes P] [--max-iters I] [--build DIR] [--mpich-build DIR]
#                              [--out DIR] [--libs ompi,han,mpich] [--tuning DIR]
#
#   -p           link profiles, in order (default 1g,10g)
#   --shapes     KxR: K nodes with R ranks each (default 4x1,4x2,2x3)
#   --max-bytes  largest per-rank size, sizes x4 from 1 B (default 16M)
#   --passes, --max-iters  agx-bench's (default 3 and 20: a 16 MiB call at 1 Gb/s takes
#                about a second)
#   --build      the Open MPI build (default build/), --mpich-build the MPICH one
#                (default build-mpich/); each needs tools/agx-bench and the interposer
#   --out        where the CSVs, logs, report.md and PNGs go (default /tmp/agx-compare)
#   --tuning     a folder with scripts/cluster/calibrate.sh's tuning-P.txt per profile P:
#                agx runs with AGX_TUNING_FILE=DIR/tuning-P.txt (the cost model measured on
#                this cluster; without it, the built-in defaults, which assume InfiniBand)
#   --method     agx-bench's timing method (default barrier: across these nodes the window
#                method's start instants were missed by some rank at every size up to
#                4 KiB at 1 Gb/s, so those sizes had no valid sample)
#
# The cluster is AGX_CLUSTER=agxcmp on AGX_CLUSTER_NET=10.213.4 unless set. Needs root and
# namespaces (exit 77 otherwise).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
profiles=1g,10g shapes=4x1,4x2,2x3 max=16M passes=3 iters=20 libs=ompi,han,mpich method=barrier
build=$root/build mbuild=$root/build-mpich out=/tmp/agx-compare tuning=""
while [ $# -gt 0 ]; do
  case $1 in
    -p) profiles=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --max-bytes) max=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --max-iters) iters=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --mpich-build) mbuild=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --libs) libs=$2; shift 2 ;;
    --method) method=$2; shift 2 ;;
    --tuning) tuning=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
done
for p in ${profiles//,/ }; do
  [ -z "$tuning" ] || [ -f "$tuning/tuning-$p.txt" ] ||
    { echo "compare: --tuning $tuning has no tuning-$p.txt (scripts/cluster/calibrate.sh -p $p --out $tuning)" >&2; exit 2; }
done
for s in ${shapes//,/ }; do
  [[ $s =~ ^([2-4])x([1-9])$ ]] || { echo "compare: a shape is KxR with K 2-4 nodes, got '$s'" >&2; exit 2; }
done
for l in ${libs//,/ }; do
  case $l in ompi|han|mpich) ;; *) echo "compare: --libs takes ompi, han, mpich; got '$l'" >&2; exit 2 ;; esac
done
need() { [ -x "$1" ] || [ -f "$1" ] || { echo "compare: $1 is not built (ninja -C $(dirname "$(dirname "$1")"))" >&2; exit 2; }; }
need "$build/tools/agx-bench"; need "$build/lib/pmpi/libagx_pmpi.so"
if [[ ,$libs, == *,mpich,* ]]; then need "$mbuild/tools/agx-bench"; need "$mbuild/lib/pmpi/libagx_pmpi.so"; fi

export AGX_CLUSTER=${AGX_CLUSTER:-agxcmp} AGX_CLUSTER_NET=${AGX_CLUSTER_NET:-10.213.4}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset AGX_TUNING_FILE AGX_ALGO
cluster=$here/cluster.sh
rc=0; "$cluster" check || rc=$?
[ $rc = 0 ] || exit $rc
trap '"$cluster" down || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$out"
out=$(cd "$out" && pwd)
bench=(--max-bytes "$max" --factor 4 --method "$method" --passes "$passes" --max-iters "$iters"
       --dropin require --algos auto --no-copy-bound --no-progress --table none)
# In the background and waited for, so that a signal reaches the EXIT trap at once.
run() { "$@" & wait $!; }
for p in ${profiles//,/ }; do
  echo "compare: profile $p $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ -n "$tuning" ]; then export AGX_TUNING_FILE=$(cd "$tuning" && pwd)/tuning-$p.txt; fi
  "$cluster" up -k 4 -p "$p"
  for s in ${shapes//,/ }; do
    k=${s%x*} r=${s#*x}
    place=$(printf "$r%.0s," $(seq "$k")); place=${place%,}
    np=$((k * r))
    for l in ${libs//,/ }; do
      csv=$out/$p-$s-$l.csv log=$out/$p-$s-$l.log
      case $l in
        ompi) run "$here/mpirun" --place "$place" -np "$np" -x LD_PRELOAD="$build/lib/pmpi/libagx_pmpi.so" \
                "$build/tools/agx-bench" "${bench[@]}" --csv "$csv" > "$log" 2>&1 ;;
        han) run "$here/mpirun" --place "$place" -np "$np" --mca coll_han_priority 100 \
               -x LD_PRELOAD="$build/lib/pmpi/libagx_pmpi.so" \
               "$build/tools/agx-bench" "${bench[@]}" --csv "$csv" > "$log" 2>&1 ;;
        mpich) run "$here/mpirun" --kind mpich --ucx-progress "$mbuild/test/cluster/libucx_finalize_progress.so" \
                 --place "$place" -np "$np" -genv LD_PRELOAD "$mbuild/lib/pmpi/libagx_pmpi.so" \
                 "$mbuild/tools/agx-bench" "${bench[@]}" --csv "$csv" > "$log" 2>&1 ;;
      esac || { tail -20 "$log"; echo "compare: $p $s $l failed (log $log)" >&2; exit 1; }
      echo "compare: $p $s $l done $(date +%T)"
    done
  done
  "$cluster" down
done
# The system's Python (Debian's python3-matplotlib draws the PNGs), else the first on PATH.
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" "$here/compare-report.py" --dir "$out" --profiles "$profiles" --shapes "$shapes" --libs "$libs" \
  > "$out/report.md"
cat "$out/report.md"
echo "compare: files in $out"
