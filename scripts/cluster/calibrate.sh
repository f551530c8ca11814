#!/usr/bin/env bash
# The cost model on the cluster (docs/cluster.md, docs/tuning.md): per link profile, make
# a cluster of K nodes (scripts/cluster/cluster.sh), calibrate both levels with agx-tune
# across K nodes x R ranks (node level from pairs on one node, network level from pairs
# on different nodes, over the shaped links), then run agx-bench with that tuning file
# over `auto`, every point-to-point algorithm and `hierarchical`, and report per algorithm
# the cost model's prediction (agx-info --predictions) against the measured median, with
# the median relative error, and whether `auto` is within 10% of the best forced
# algorithm at each size (scripts/cluster/calibrate-report.py). The cluster is removed
# afterwards, also on failure or a signal.
#
#   scripts/cluster/calibrate.sh [-p 1g,10g] [-k 4] [-r 2] [--sizes MIN:MAX] [--build DIR]
#                                [--out DIR] [--passes P] [--tune-args "ARGS"]
#
#   -p        link profiles, one cluster each, in order (default 1g)
#   -k, -r    nodes, ranks per node (default 4 x 2)
#   --sizes   per-rank bytes, x4 from MIN (default 64:1048576)
#   --build   the Open MPI build (default build/ of this checkout)
#   --out     where the files go (default /tmp/agx-calibrate): per profile
#             tuning-P.txt, predicted-P.csv, bench-P.csv, compare-P.csv, report-P.md and
#             the logs; report.md is every profile's report, also printed
#   --passes  agx-bench's batches per candidate and size (default 5)
#   --tune-args  more agx-tune options (e.g. "--quick", "--crossovers")
#
# The cluster is AGX_CLUSTER=agxcal on AGX_CLUSTER_NET=10.213.2 unless set (not the
# tests' agxt, nor a cluster made by hand). Needs root and namespaces (exit 77 otherwise).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
profiles=1g k=4 r=2 sizes=64:1048576 build=$root/build out=/tmp/agx-calibrate passes=5 tune_args=""
while [ $# -gt 0 ]; do
  case $1 in
    -p) profiles=$2; shift 2 ;;
    -k) k=$2; shift 2 ;;
    -r) r=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --tune-args) tune_args=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "calibrate: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
done
[[ $k =~ ^[0-9]+$ && $k -ge 2 ]] || { echo "calibrate: -k must be 2 or more nodes, got '$k'" >&2; exit 2; }
[[ $r =~ ^[0-9]+$ && $r -ge 1 ]] || { echo "calibrate: -r must be 1 or more ranks per node, got '$r'" >&2; exit 2; }
[[ $sizes =~ ^([0-9]+):([0-9]+)$ ]] || { echo "calibrate: --sizes takes MIN:MAX in bytes, got '$sizes'" >&2; exit 2; }
min=${BASH_REMATCH[1]} max=${BASH_REMATCH[2]}
for t in agx-tune agx-info agx-bench; do
  [ -x "$build/tools/$t" ] || { echo "calibrate: $build/tools/$t is not built (ninja -C $build)" >&2; exit 2; }
done

export AGX_CLUSTER=${AGX_CLUSTER:-agxcal} AGX_CLUSTER_NET=${AGX_CLUSTER_NET:-10.213.2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset AGX_TUNING_FILE AGX_ALGO  # the job's own, below
cluster=$here/cluster.sh
rc=0; "$cluster" check || rc=$?
[ $rc = 0 ] || exit $rc
trap '"$cluster" down || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$out"
out=$(cd "$out" && pwd)
np=$((k * r))
# Each job runs in the background and is waited for, so that a signal to this script is
# handled at once (the EXIT trap's `down` kills what runs on the nodes), not after the job.
run() { "$here/mpirun" --place "$r" -np "$np" "$@" & wait $!; }
# Every variant agx-bench can force here: all but shared_memory (one node only).
algos=auto$(for a in $("$build/tools/agx-info" --algorithms); do [ "$a" = shared_memory ] || printf ',%s' "$a"; done)
[ "$r" -ge 2 ] || algos=${algos/,hierarchical/}  # hierarchical needs a node with two ranks
: > "$out/report.md"
for p in ${profiles//,/ }; do
  start=$SECONDS load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "calibrate: profile $p, $k nodes x $r ranks"
  "$cluster" up -k "$k" -p "$p"
  # shellcheck disable=SC2086  # tune_args are words
  run "$build/tools/agx-tune" --output "$out/tuning-$p.txt" $tune_args > "$out/agx-tune-$p.log" 2>&1 ||
    { cat "$out/agx-tune-$p.log"; echo "calibrate: agx-tune failed" >&2; exit 1; }
  echo "calibrate: agx-tune $((SECONDS - start)) s: $out/tuning-$p.txt"
  export AGX_TUNING_FILE=$out/tuning-$p.txt
  run "$build/tools/agx-info" --sizes "$min:$max" --predictions "$out/predicted-$p.csv" > "$out/agx-info-$p.log" 2>&1 ||
    { cat "$out/agx-info-$p.log"; echo "calibrate: agx-info failed" >&2; exit 1; }
  sed -n '/^tuning:/,/^placement:/p' "$out/agx-info-$p.log"
  run "$build/tools/agx-bench" --min-bytes "$min" --max-bytes "$max" --factor 4 --algos "$algos" \
    --no-copy-bound --passes "$passes" --table long --no-progress --csv "$out/bench-$p.csv" > "$out/agx-bench-$p.log" 2>&1 ||
    { tail -20 "$out/agx-bench-$p.log"; echo "calibrate: agx-bench failed" >&2; exit 1; }
  unset AGX_TUNING_FILE
  "$cluster" down
  python3 "$here/calibrate-report.py" --label "$p" --tuning "$out/tuning-$p.txt" \
    --predicted "$out/predicted-$p.csv" --bench "$out/bench-$p.csv" --csv "$out/compare-$p.csv" > "$out/report-$p.md"
  echo "calibrate: profile $p took $((SECONDS - start)) s; load average before $load_before," \
    "after $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores; above the core count the numbers measure the scheduler)" >> "$out/report-$p.md"
  { cat "$out/report-$p.md"; echo; } >> "$out/report.md"
done
echo
cat "$out/report.md"
echo "calibrate: files in $out"
