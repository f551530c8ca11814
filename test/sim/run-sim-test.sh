#!/usr/bin/env bash
# The SMPI check: builds agx-sim with smpicxx (tools/sim/build.sh) and runs every agx
# point-to-point algorithm at every radix the registry lists (bruck:k=4, ...), lib's node
# paths that serve several nodes (hierarchical) on the simulator's node model,
# auto (lib's selector), the fair baselines (ompi41, mpich, han) and SMPI's MPI_Allgather
# on a tiny simulated cluster (4 nodes x 4 ranks, and 12 ranks for the folding paths), two
# sizes, every result checked inside the driver (--check); the 16-rank run also places the
# nodes in groups of 2 for the cost model, and the cluster's routes (--routes). Then a
# 64-rank dragonfly (platforms/dragonfly-64r-1ppn.xml) at 1 MiB: with the platform's routes
# the model must price distance halving and locality_bruck within 5 % of their simulated
# time (without routes: 0.75 and 0.53, router links shared by the detour to a group's
# gateway router) and auto must take the fastest of ring, neighbour exchange and distance
# halving (without routes it took neighbour exchange, 1.20x ring). Then bad arguments (--sizes 8,x, a short
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
  groups=()  # 16 ranks: also the cost model's group term (2 nodes per group) and routes
  [ "$np" -eq 16 ] && groups=(--groups 2,2e-11 --routes cluster,0,0,50e9,0.3e-6,450e9,0.7e-6,0.5e-6)
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
# The routed model on a dragonfly (timing run: shared buffers, 64 ranks, one size).
df="$root/platforms/dragonfly-64r-1ppn.xml"
for h in $(seq 0 63); do echo "node-$h"; done > "$work/hosts64"
smpirun -platform "$df" -hostfile "$work/hosts64" -np 64 --cfg=smpi/simulate-computation:no \
  --cfg=smpi/shared-malloc-blocksize:67108864 --cfg=smpi/privatization:0 \
  --cfg=smpi/os:0:0.5e-6:0 --cfg=smpi/or:0:0.5e-6:0 --cfg=smpi/bw-factor:0:1 --cfg=smpi/lat-factor:0:1 \
  --cfg=network/crosstraffic:0 --log=root.thres:warning \
  "$binary" --ppn 1 --sizes 1048576 --algos ring,neighbor_exchange,distance_halving,locality_bruck,auto \
  --cost 1.2e-6,2.2222e-12,5e-7,2e-6,2e-11,5e-7 --groups 16,2e-11 --group-alpha 1.4e-6 \
  --routes dragonfly,4,4,50e9,0.3e-6,450e9,0.7e-6,0.5e-6 --label df64 \
  > "$work/out.txt" 2> "$work/err.txt" || { cat "$work/out.txt" "$work/err.txt"; exit 1; }
cat "$work/out.txt"
python3 - "$work/out.txt" <<'PY' || exit 1
import sys
rows = {f[4]: f for f in (l.strip().split(",") for l in open(sys.argv[1])) if f[0] == "AGXSIM" and f[1] != "label"}
sim = {a: float(rows[a][7]) for a in rows}
bad = [f"{a}: pred/sim {float(rows[a][8]) / sim[a]:.2f}" for a in ("distance_halving", "locality_bruck")
       if abs(float(rows[a][8]) / sim[a] - 1) > 0.05]
best = min(("ring", "neighbor_exchange", "distance_halving"), key=sim.get)
if sim["auto"] > sim[best] * 1.05:
    bad.append(f"auto ran {rows['auto'][5]}, {sim['auto'] / sim[best]:.2f}x {best}")
if bad:
    sys.exit("FAIL: dragonfly 64 x 1, 1 MiB: " + "; ".join(bad))
print("sim: dragonfly 64 x 1, 1 MiB: routed model within 5 %, auto took the fastest")
PY
# Bad values are refused with a message and exit status 2 (strtoull once read 8,x as 8,0).
for bad in "--sizes 8,x|--sizes: not a number: 'x'" "--cost 1,2,3|--cost: needs 6" \
           "--ppn 4x|--ppn: not a number: '4x'" "--groups 2,y|--groups: not a number: 'y'" \
           "--routes fattree,2,2|--routes: needs KIND" \
           "--routes dragonfly,2,2,5e10,3e-7,4.5e11,7e-7,5e-7|--routes: dragonfly: hosts must be A*A*B" \
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
