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
# halving (without routes it took neighbour exchange, 1.20x ring). Then the platform that
# tools/sim/cluster-platform.py makes from the 1 Gb/s cluster's tuning file (below). Then the
# grid's quick part (run-grid.py --quick): auto within 5 % of agx's best and at or below
# the best fair baseline at each of its 12 points. Then bad arguments (--sizes 8,x, a short
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
# The platform of a measured cluster (tools/sim/cluster-platform.py on the 1 Gb/s 4 x 2
# cluster's tuning file, docs/scale.md "Calibration from the cluster"): its host links are
# 1/network.beta and (network.alpha - network.overhead) / 2, its loopback 1/node.beta and
# node.alpha; on it, with the file (--tuning) and the per-level receive overhead
# (--recv-overhead), recursive doubling at 64 B simulates within 2 % of the model's
# prediction (without --recv-overhead, smpi/or 0: 0.52 of it), and auto runs the file's measured
# winners: hierarchical at 64 B, ring at 1 MiB (the model alone: hierarchical there).
cal="$root/docs/scale/cluster-1g"
python3 "$root/tools/sim/cluster-platform.py" "$cal/tuning-1g.txt" --nodes 4 --ppn 2 --name cal \
  --bench "$cal/bench-1g.csv" --out-dir "$work/cal" > /dev/null
python3 - "$cal/tuning-1g.txt" "$work/cal/cal.xml" <<'PY' || exit 1
import re, sys
t = {f[0]: float(f[1]) for f in (l.split() for l in open(sys.argv[1])) if len(f) == 2 and f[0][0] in "nc"}
xml = open(sys.argv[2]).read()
attr = lambda name, unit: float(re.search(rf'\b{name}="([0-9.e+-]+){unit}"', xml).group(1))
want = {"bw": (attr("bw", "Bps"), 1 / t["network.beta_s_per_byte"]),
        "lat": (attr("lat", "us") * 1e-6, (t["network.alpha_s"] - t["network.overhead_s"]) / 2),
        "loopback_bw": (attr("loopback_bw", "Bps"), 1 / t["node.beta_s_per_byte"]),
        "loopback_lat": (attr("loopback_lat", "us") * 1e-6, t["node.alpha_s"] - t["node.overhead_s"])}
bad = [f"{k} {got:.6g}, want {w:.6g}" for k, (got, w) in want.items() if abs(got - w) > 1e-6 * w]
if 'radical="0-3"' not in xml or 'sharing_policy="SPLITDUPLEX"' not in xml:
    bad.append("not 4 hosts with split-duplex links")
if bad:
    sys.exit("FAIL: cluster platform: " + "; ".join(bad))
PY
python3 "$root/tools/sim/run-grid.py" --params "$work/cal/cal.json" --binary "$binary" --work-dir "$work/cal" \
  -o "$work/cal/sim.csv" --no-plot --no-selectors --sizes 64,1048576 --algos recursive_doubling,auto > /dev/null
python3 - "$work/cal/sim.csv" <<'PY' || exit 1
import csv, sys
rows = {(r["algo"], r["bytes"]): r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))}
bad = []
rd = rows.get(("recursive_doubling", "64"))
if rd is None or rd["status"] != "ok" or abs(float(rd["sim_s"]) / float(rd["pred_s"]) - 1) > 0.02:
    bad.append(f"recursive_doubling 64 B: {rd and (rd['status'], rd['sim_s'], rd['pred_s'])} (want sim within 2 % of pred)")
for b, want in (("64", "hierarchical"), ("1048576", "ring")):
    ran = rows.get(("auto", b), {}).get("ran", "")
    if ran.split("/")[0] != want:
        bad.append(f"auto at {b} B ran '{ran}', not the tuning file's {want}")
if bad:
    sys.exit("FAIL: cluster platform: " + "; ".join(bad))
print(f"sim: cluster platform from the 1 Gb/s tuning file: links as the file's levels; recursive doubling "
      f"64 B {float(rd['sim_s']) * 1e6:.1f} us (model {float(rd['pred_s']) * 1e6:.1f}); auto ran the measured winners")
PY
# The grid's quick part (tools/sim/run-grid.py --quick: the four 64-rank platforms at 8 B,
# 256 B and 64 KiB, every agx algorithm and the radix variants bruck:k=4 and
# locality_bruck:k=4, auto, the fair baselines and SMPI's selectors; seconds; 256 B on the
# dragonfly 64 x 1 fails without the routed model's per-rank clocks, docs/scale.md):
# at every point auto must be within 5 % of agx's best algorithm and at or below the best
# fair baseline (Open MPI 4.1's fixed rule, MPICH's rules, HAN), docs/scale.md's targets.
python3 "$root/tools/sim/run-grid.py" --quick --binary "$binary" --work-dir "$work/quick" \
  -o "$work/quick.csv" --no-plot > "$work/quick.txt" 2>&1 || { cat "$work/quick.txt"; exit 1; }
python3 - "$work/quick.csv" <<'PY' || exit 1
import collections, csv, sys
points = collections.defaultdict(dict)
for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")):
    if r["status"] == "ok":
        points[(r["platform"], int(r["bytes"]))][r["algo"]] = float(r["sim_s"])
fair_names = ("ompi41", "mpich", "han")
bad, lines = [], []
for (platform, size), t in sorted(points.items()):
    agx = {a: s for a, s in t.items() if a != "auto" and a not in fair_names and not a.startswith("smpi")}
    fair = {a: t[a] for a in fair_names if a in t}
    if "auto" not in t or not agx or not fair:
        bad.append(f"{platform} {size} B: missing rows ({sorted(t)})")
        continue
    best = min(agx, key=agx.get)
    best_fair = min(fair, key=fair.get)
    lines.append(f"{platform} {size} B: auto/{best} {t['auto'] / agx[best]:.3f}, auto/{best_fair} {t['auto'] / fair[best_fair]:.3f}")
    if t["auto"] > 1.05 * agx[best]:
        bad.append(f"{platform} {size} B: auto {t['auto'] / agx[best]:.2f}x {best}")
    if t["auto"] > fair[best_fair] * (1 + 1e-9):
        bad.append(f"{platform} {size} B: auto {t['auto'] / fair[best_fair]:.2f}x the fair baseline {best_fair}")
if len(points) != 12:
    bad.append(f"{len(points)} points, want 12 (4 platforms x 3 sizes)")
print("\n".join("sim: quick grid: " + l for l in lines))
if bad:
    sys.exit("FAIL: quick grid: " + "; ".join(bad))
PY
# Bad values are refused with a message and exit status 2 (strtoull once read 8,x as 8,0).
for bad in "--sizes 8,x|--sizes: not a number: 'x'" "--cost 1,2,3|--cost: needs 6" \
           "--ppn 4x|--ppn: not a number: '4x'" "--groups 2,y|--groups: not a number: 'y'" \
           "--routes fattree,2,2|--routes: needs KIND" \
           "--routes dragonfly,2,2,5e10,3e-7,4.5e11,7e-7,5e-7|--routes: dragonfly: hosts must be A*A*B" \
           "--tuning /nonexistent|--tuning: cannot read" "--recv-overhead 1|--recv-overhead: needs 2" \
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
