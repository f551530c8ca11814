#!/usr/bin/env bash
# The SMPI check: builds agx-sim with smpicxx (tools/sim/build.sh) and runs every agx
# point-to-point algorithm at every radix the registry lists (bruck:k=4, ...), lib's node
# paths that serve several nodes (hierarchical) on the simulator's node model,
# auto (lib's selector), the fair baselines (ompi41, mpich, han) and SMPI's MPI_Allgather
# on a tiny simulated cluster (4 nodes x 4 ranks, and 12 ranks for the folding paths), two
# sizes, every result checked inside the driver (--check); the 16-rank run also places the
# nodes in groups of 2 for the cost model. Then bad arguments (--sizes 8,x, a short
# --cost, ...) must be refused with a message and exit status 2. Skips (77) without smpicxx.
#
#   test/sim/run-sim-test.sh BUILD_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/build-sim-test}"
if ! command -v smpicxx >/dev/null 2>&1 || ! command -v smpirun >/dev/null 2>&1; then
  echo "SKIP: smpicxx/smpirun not found (Debian: apt-get install libsimgrid-dev simgrid)"
  exit 77
fi
binary="$("$root/tools/sim/build.sh" "$out" | tail -n 1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/platform.xml" <<'XML'
<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <cluster id="tiny" prefix="node-" suffix="" radical="0-3" speed="1Gf" bw="50GBps" lat="0.3us"
           sharing_policy="SPLITDUPLEX" loopback_bw="450GBps" loopback_lat="0.7us"/>
</platform>
XML
for h in 0 1 2 3; do printf 'node-%s\n' "$h" "$h" "$h" "$h"; done > "$work/hosts"
# The algorithms come from the registry's data (include/agx/algorithms.def, read by
# tools/algorithms.py as meson.build reads it): a new registry line runs here by itself.
# shared_memory is left out: it serves one node, and the cluster has four.
registry="$(python3 "$root/tools/algorithms.py" variants --sep ,)"
node_paths="$(python3 "$root/tools/algorithms.py" node-paths | grep -vx shared_memory | paste -sd, -)"
algos="$registry,$node_paths,auto,ompi41,mpich,han,mpi"
echo "sim: algorithms: $algos"
for np in 16 12; do
  groups=()  # 16 ranks: also the cost model's group term (2 nodes per group) for auto
  [ "$np" -eq 16 ] && groups=(--groups 2,2e-11)
  smpirun -platform "$work/platform.xml" -hostfile "$work/hosts" -np "$np" \
    --cfg=smpi/simulate-computation:no --cfg=smpi/os:0:0.5e-6:0 --cfg=smpi/or:0:0.5e-6:0 \
    --log=root.thres:warning \
    "$binary" --ppn 4 --sizes 7,65541 --algos "$algos" --check --label "tiny-$np" "${groups[@]}" \
    > "$work/out.txt" 2> "$work/err.txt" || { cat "$work/out.txt" "$work/err.txt"; exit 1; }
  cat "$work/out.txt"
  ok=$(grep -c ',ok$' "$work/out.txt" || true)
  want=$(( $(echo "$algos" | tr ',' '\n' | wc -l) * 2 ))
  if [ "$ok" -ne "$want" ]; then
    echo "FAIL: $np ranks: $ok of $want points verified"
    exit 1
  fi
done
# Bad values are refused with a message and exit status 2 (strtoull once read 8,x as 8,0).
for bad in "--sizes 8,x|--sizes: not a number: 'x'" "--cost 1,2,3|--cost: needs 6" \
           "--ppn 4x|--ppn: not a number: '4x'" "--groups 2,y|--groups: not a number: 'y'" \
           "--no-such-option|not expected: --no-such-option"; do
  args=(${bad%%|*})
  want=${bad#*|}
  [ "${args[0]}" = "--sizes" ] || args+=(--sizes 7)
  rc=0
  smpirun -platform "$work/platform.xml" -hostfile "$work/hosts" -np 4 --log=root.thres:warning \
    "$binary" --ppn 4 --algos ring "${args[@]}" > "$work/out.txt" 2> "$work/err.txt" || rc=$?
  if [ "$rc" -ne 2 ] || ! grep -F -- "agx-sim:" "$work/err.txt" | grep -qF -- "$want"; then
    cat "$work/out.txt" "$work/err.txt"
    echo "FAIL: agx-sim ${args[*]}: exit status $rc (want 2) and message '$want'"
    exit 1
  fi
done
echo "sim: every algorithm correct under SMPI at 16 and 12 ranks; bad arguments refused"
