#!/usr/bin/env bash
# agx-tune across the cluster calibrates two levels (test cluster-tune-levels, run by
# cluster-test.sh on 2 nodes with 1 Gb/s links): 1 rank on node 0 and 2 on node 1, so the
# node level can come only from the pair on node 1 and the network level only from the
# pairs across the link. Checks: the file's machine line says both were measured; the
# network level differs from the node level, and its bandwidth is the shaped link's (at
# most 1 Gb/s and a quarter, below the node level's); the node's synchronization cost is
# measured; agx-info, given the file, prints the two levels with the file's numbers.
#
#   tune-levels.sh CLUSTER_MPIRUN TOOLS_DIR
set -euo pipefail
mpirun=$1 tools=$2
work=$(mktemp -d /tmp/agx-tune-levels.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; echo "--- tuning file:"; cat "$work/tune.txt" 2>/dev/null || true; exit 1; }

"$mpirun" --place 1,2 -np 3 "$tools/agx-tune" --quick --output "$work/tune.txt" > "$work/tune.log" 2>&1 ||
  { cat "$work/tune.log"; fail "agx-tune failed"; }
grep -q '^machine .* nodes 2 ranks_per_node 2; node level measured on 1 node(s), network level measured among 2 nodes$' \
  "$work/tune.txt" || fail "the machine line does not say that both levels were measured"
key() { awk -v k="$1" '$1 == k {print $2}' "$work/tune.txt"; }
na=$(key node.alpha_s) nb=$(key node.beta_s_per_byte) wa=$(key network.alpha_s) wb=$(key network.beta_s_per_byte)
[ -n "$na" ] && [ -n "$nb" ] && [ -n "$wa" ] && [ -n "$wb" ] || fail "a level's alpha or beta is missing"
echo "tune-levels: node alpha $na s beta $nb s/B; network alpha $wa s beta $wb s/B"
awk -v na="$na" -v nb="$nb" -v wa="$wa" -v wb="$wb" 'BEGIN { exit !(na != wa || nb != wb) }' ||
  fail "the network level is the node level"
# 1 Gb/s is 8e-9 s/B; the link is the network level's bottleneck, not the node's.
awk -v wb="$wb" 'BEGIN { exit !(wb >= 8e-9 / 1.25) }' ||
  fail "network bandwidth $(awk -v b="$wb" 'BEGIN{print 1e-9/b}') GB/s is above the 1 Gb/s link (+25%)"
awk -v nb="$nb" -v wb="$wb" 'BEGIN { exit !(nb < wb) }' || fail "the node level is not faster than the 1 Gb/s link"
# The node's flag synchronization is measured too (on node 1), not the built-in 0.2 us.
sync=$(key node_sync_s)
[ -n "$sync" ] && [ "$sync" != 2e-07 ] || fail "node_sync_s is the built-in default, not measured on node 1"

AGX_TUNING_FILE=$work/tune.txt "$mpirun" --place 1,2 -np 3 "$tools/agx-info" --sizes 1024:1024 > "$work/info.log" 2>&1 ||
  { cat "$work/info.log"; fail "agx-info failed"; }
grep -q "^tuning: $work/tune.txt" "$work/info.log" || { cat "$work/info.log"; fail "agx-info did not use the file"; }
gbs() { awk -v b="$1" 'BEGIN { printf "%.3f", 1e-9 / b }'; }
grep -Eq "^  node: +alpha [0-9.]+ us, .*, $(gbs "$nb") GB/s" "$work/info.log" ||
  { cat "$work/info.log"; fail "agx-info does not show the node level of the file"; }
grep -Eq "^  network: +alpha [0-9.]+ us, .*, $(gbs "$wb") GB/s" "$work/info.log" ||
  { cat "$work/info.log"; fail "agx-info does not show the network level of the file"; }
grep -q '^placement: 3 ranks on 2 node(s), up to 2 per node' "$work/info.log" ||
  { cat "$work/info.log"; fail "agx-info does not see 2 nodes"; }
sed -n '/^tuning:/,/^placement:/p' "$work/info.log"
echo "tune-levels: ok"
