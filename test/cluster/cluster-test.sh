#!/usr/bin/env bash
# One test of the cluster suite (test/cluster/meson.build, docs/cluster.md): makes a
# cluster of K nodes (scripts/cluster/cluster.sh), runs COMMAND (usually
# scripts/cluster/mpirun ...) from the machine's own namespace, checks it, and removes the
# cluster again, also when the test fails or is stopped. Exit 77 (SKIP) with the reason
# when this machine does not allow namespaces.
#
#   cluster-test.sh SCRIPTS_DIR --nodes K [options] -- COMMAND...
#
#   --profile P         link profile (10g, 1g, none; default 10g)
#   --traffic BYTES     every node's link must have sent and received at least BYTES
#   --lose NODE:S:D     S seconds after the start NODE goes silent (cluster.sh freeze: link
#                       down, processes stopped, as a crashed host looks to its peers), D
#                       seconds later its processes are killed (cluster.sh kill). With D=0
#                       they are killed at once.
#   --expect-fail       COMMAND must end with a non-zero status (default: status 0)
#   --expect REGEX      a line of COMMAND's output must match (repeatable)
#   --max-seconds S     COMMAND must end within S seconds (killed after S + 30)
#   --repeat N          run COMMAND N times in a row (default 1); every run is checked as
#                       above, --max-seconds bounds each run
#
# After removal: no namespace, hosts file or state of the cluster is left, and no agx
# shared-memory segment created during the test remains in /dev/shm.
set -euo pipefail
scripts=$1; shift
nodes=2 profile=10g traffic=0 kill_spec="" expect_fail=0 max_seconds=240 repeat=1 expects=()
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --traffic) traffic=$2; shift 2 ;;
    --lose) kill_spec=$2; shift 2 ;;
    --expect-fail) expect_fail=1; shift ;;
    --expect) expects+=("$2"); shift 2 ;;
    --max-seconds) max_seconds=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "cluster-test: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "cluster-test: no command" >&2; exit 2; }

export AGX_CLUSTER=${AGX_CLUSTER:-agxt} AGX_CLUSTER_NET=${AGX_CLUSTER_NET:-10.213.1}
cluster=$scripts/cluster.sh
rc=0; "$cluster" check || rc=$?
[ $rc = 0 ] || exit $rc   # 77: SKIP, the reason is printed

work=$(mktemp -d /tmp/agx-cluster-test.XXXXXX)
ls /dev/shm > "$work/shm.before"
killer=""
cleanup() {
  local status=$?
  [ -z "$killer" ] || kill "$killer" 2>/dev/null || true
  "$cluster" down || status=1
  local left
  left=$(ip netns list | awk -v p="^$AGX_CLUSTER-" '$1 ~ p {print $1}')
  [ -z "$left" ] || { echo "FAIL: namespaces left behind: $left"; status=1; }
  [ ! -e "/run/agx-cluster/$AGX_CLUSTER" ] || { echo "FAIL: /run/agx-cluster/$AGX_CLUSTER left behind"; status=1; }
  compgen -G "/etc/netns/$AGX_CLUSTER-n*" >/dev/null && { echo "FAIL: /etc/netns/$AGX_CLUSTER-n* left behind"; status=1; }
  local seg pid
  for seg in $(ls /dev/shm | grep -E '^agx-[0-9]+-' | sort | comm -13 <(sort "$work/shm.before") -); do
    pid=${seg#agx-}; pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null || { echo "FAIL: shared-memory segment /dev/shm/$seg left behind (its process $pid is gone)"; status=1; }
  done
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$cluster" up -k "$nodes" -p "$profile"
"$cluster" counters > "$work/counters.before"

if [ -n "$kill_spec" ]; then
  IFS=: read -r lose_node lose_at lose_after <<< "$kill_spec"
  ( sleep "$lose_at"
    if [ "${lose_after:-0}" != 0 ]; then "$cluster" freeze "$lose_node"; sleep "$lose_after"; fi
    "$cluster" kill "$lose_node" ) &
  killer=$!
fi
fail=0
for ((run = 1; run <= repeat; run++)); do
  [ "$repeat" = 1 ] || echo "cluster-test: run $run of $repeat"
  start=$SECONDS
  status=0
  timeout -k 5 $((max_seconds + 30)) "$@" > >(tee "$work/out") 2>&1 || status=$?
  elapsed=$((SECONDS - start))
  sleep 0.2  # tee's last lines
  echo "cluster-test: command ended with status $status after $elapsed s"

  if [ $expect_fail = 1 ]; then
    [ $status != 0 ] || { echo "FAIL: the command succeeded, a failure was expected"; fail=1; }
  else
    [ $status = 0 ] || { echo "FAIL: the command failed (status $status)"; fail=1; }
  fi
  [ $status != 124 ] && [ $status != 137 ] || { echo "FAIL: the command did not end within $((max_seconds + 30)) s"; fail=1; }
  [ $elapsed -le "$max_seconds" ] || { echo "FAIL: the command took $elapsed s, more than $max_seconds s"; fail=1; }
  for e in "${expects[@]}"; do
    grep -Eq -- "$e" "$work/out" || { echo "FAIL: no output line matches /$e/"; fail=1; }
  done
  [ $fail = 0 ] || break
done
if [ "$traffic" -gt 0 ]; then
  "$cluster" counters > "$work/counters.after"
  while read -r node _ tx0 _ rx0 _; do
    read -r tx1 rx1 < <(awk -v n="$node" '$1 == n {print $3, $5}' "$work/counters.after")
    echo "cluster-test: $node link sent $((tx1 - tx0)) B, received $((rx1 - rx0)) B"
    [ $((tx1 - tx0)) -ge "$traffic" ] && [ $((rx1 - rx0)) -ge "$traffic" ] ||
      { echo "FAIL: $node's link carried less than $traffic B each way: the MPI library did not use the network"; fail=1; }
  done < "$work/counters.before"
fi
exit $fail
