#!/usr/bin/env python3
"""Turns an agx tuning file (agx-tune's output) into a SimGrid platform of the cluster it
was measured on, and the agx-sim arguments that make `auto` use the same tuning.

    tools/sim/cluster-platform.py TUNING --nodes 4 --ppn 2 [--name cluster-1g]
                                  [--bench BENCH.csv] [--out-dir build-sim/cluster]

Writes OUT/NAME.xml (the platform) and OUT/NAME.json (a params file for
tools/sim/run-grid.py --params, one platform: hosts, ranks, SMPI settings, agx-sim
arguments and, with --bench, the sizes and algorithms that agx-bench measured), and prints
the platform's numbers and the agx-sim arguments.

The cost model's time of a round on level l with m messages (core/cost_model.hpp) is
    α_l + o_l · (m - 1) + β_l · bytes
so a round of one message costs α_l, of which o_l is the per-message CPU time (on the
network level: the MPI library's TCP path; the wire and the stack account for the rest).
SMPI spends per-message CPU time as the receiver's overhead (smpi/or: after each eager
message has arrived, one message at a time), so the platform is

  K hosts (R ranks each), each with one SPLITDUPLEX link to a switch (a flat SimGrid
  cluster without backbone: a message between hosts crosses the sender's link up and the
  receiver's link down, as on a bridge with a shaped veth per node):
      bandwidth 1/β_network, latency (α_network - o_network) / 2 per link;
  each host's loopback (ranks of one node; FATPIPE, every message gets the full rate, as
  the model gives each rank its own node-level bytes):
      bandwidth 1/β_node, latency α_node - o_node;
  the receiver's CPU time per message, by level (agx-sim --recv-overhead, which replaces
  smpi/or by a callback that tells node from network by the two hosts): o_node, o_network;
  no sender's time (smpi/os, smpi/ois 0);
  every message eager (smpi/send-is-detached-thresh above any message): the tuning's
  levels have no rendezvous step (rendezvous_s 0), and SMPI charges no CPU time at all to a
  message it does not send eagerly.

So one message between two hosts costs α_network + bytes · β_network, m messages to one
receiver α_network + o_network · (m - 1) + ..., as the model prices them. The node
operations of `hierarchical` (puts and gets on the node's segment, tools/sim/sim_node.hpp)
cost the file's copy_s_per_byte and node_sync_s (agx-sim reads them with --tuning, with
the file's measured winners for `auto`).
"""
import argparse
import csv
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# SMPI settings of the cluster runs (run-grid.py's SETTINGS, these replacing its values):
# no sender's overhead, the receiver's comes from agx-sim --recv-overhead, every message
# sent eagerly (detached) up to 1 GiB.
EAGER_UP_TO = 1 << 30


def read_tuning(path):
    """The key/value lines of an agx tuning file (numbers; 'best' and text lines aside)."""
    values = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) == 2:
                try:
                    values[fields[0]] = float(fields[1])
                except ValueError:
                    pass
    need = [f"{lvl}.{k}" for lvl in ("node", "network") for k in ("alpha_s", "beta_s_per_byte", "overhead_s")]
    missing = [k for k in need if k not in values]
    if missing:
        sys.exit(f"cluster-platform.py: {path} lacks {', '.join(missing)}")
    return values


def derive(t):
    """The platform's links and overheads from the tuning's two levels."""
    net_a, net_b, net_o = t["network.alpha_s"], t["network.beta_s_per_byte"], t["network.overhead_s"]
    node_a, node_b, node_o = t["node.alpha_s"], t["node.beta_s_per_byte"], t["node.overhead_s"]
    if net_b <= 0 or node_b <= 0:
        sys.exit("cluster-platform.py: a level's beta_s_per_byte is not above 0")
    notes = []
    wire = net_a - net_o
    if wire < 0:
        notes.append(f"network alpha {net_a:.3g} s below its overhead {net_o:.3g} s: link latency 0")
        wire = 0.0
    loop = node_a - node_o
    if loop < 0:
        notes.append(f"node alpha {node_a:.3g} s below its overhead {node_o:.3g} s: loopback latency 0")
        loop = 0.0
    for lvl in ("node", "network"):
        if t.get(f"{lvl}.rendezvous_s", 0) > 0:
            notes.append(f"{lvl}.rendezvous_s {t[f'{lvl}.rendezvous_s']:.3g} s is not modelled "
                         "(every simulated message is eager)")
    return {
        "link_Bps": 1 / net_b, "link_lat_s": wire / 2,
        "loopback_Bps": 1 / node_b, "loopback_lat_s": loop,
        "recv_overhead_s": [node_o, net_o],
    }, notes


def bench_points(path):
    """Sizes and agx algorithms (and whether MPI_Allgather ran) of an agx-bench CSV."""
    sizes, algos, mpi = set(), [], False
    with open(path, newline="") as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            sizes.add(int(row["bytes_per_rank"]))
            name = row["candidate"]
            if name == "mpi":
                mpi = True
            elif name not in algos:
                algos.append(name)
    return sorted(sizes), algos, mpi


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tuning", help="agx tuning file (agx-tune --output)")
    ap.add_argument("--nodes", type=int, required=True, help="nodes K (SimGrid hosts)")
    ap.add_argument("--ppn", type=int, required=True, help="ranks per node R")
    ap.add_argument("--leaders", type=int, default=1, help="leaders per node of hierarchical (AGX_HIER_LEADERS)")
    ap.add_argument("--name", default="cluster")
    ap.add_argument("--bench", help="agx-bench CSV: simulate its sizes and algorithms (and smpi:ompi "
                                    "where it measured MPI_Allgather)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "build-sim", "cluster"))
    args = ap.parse_args()
    if args.nodes < 1 or args.ppn < 1:
        sys.exit("cluster-platform.py: --nodes and --ppn must be at least 1")
    t = read_tuning(args.tuning)
    d, notes = derive(t)
    os.makedirs(args.out_dir, exist_ok=True)
    xml_path = os.path.join(args.out_dir, args.name + ".xml")
    src = os.path.relpath(os.path.abspath(args.tuning), ROOT)
    with open(xml_path, "w") as f:
        f.write(f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!-- {args.name}: {args.nodes} nodes x {args.ppn} ranks from {src}; generated by tools/sim/cluster-platform.py
     link: 1/network.beta, (network.alpha - network.overhead) / 2 (two links a message);
     loopback: 1/node.beta, node.alpha - node.overhead; overheads: agx-sim --recv-overhead -->
<platform version="4.1">
  <cluster id="{args.name}" prefix="node-" suffix="" radical="0-{args.nodes - 1}" speed="1Gf"
           bw="{d["link_Bps"]:.9g}Bps" lat="{d["link_lat_s"] * 1e6:.9g}us" sharing_policy="SPLITDUPLEX"
           loopback_bw="{d["loopback_Bps"]:.9g}Bps" loopback_lat="{d["loopback_lat_s"] * 1e6:.9g}us"/>
</platform>
""")
    # Paths from the repository root (run-grid.py runs smpirun there).
    sim_args = ["--tuning", src,
                "--recv-overhead", ",".join(repr(x) for x in d["recv_overhead_s"]),
                "--leaders", str(args.leaders)]
    settings = ["--cfg=smpi/os:0:0:0", "--cfg=smpi/ois:0:0:0",
                "--cfg=smpi/or:0:0:0",  # replaced by agx-sim --recv-overhead's callback
                f"--cfg=smpi/send-is-detached-thresh:{EAGER_UP_TO}"]
    entry = {
        "topology": "cluster", "nranks": args.nodes * args.ppn, "ppn": args.ppn,
        "hosts": args.nodes, "xml": os.path.relpath(xml_path, ROOT) if xml_path.startswith(ROOT)
        else xml_path, "tuning": src, **d, "args": sim_args, "settings": settings,
    }
    if args.bench:
        sizes, algos, mpi = bench_points(args.bench)
        entry["grid"] = {"sizes": sizes, "algos": algos,
                         "selectors": {"ompi": sizes} if mpi else {}}
    json_path = os.path.join(args.out_dir, args.name + ".json")
    with open(json_path, "w") as f:
        json.dump({args.name: entry}, f, indent=1)
    for n in notes:
        print(f"cluster-platform.py: note: {n}", file=sys.stderr)
    print(f"{args.name}: {args.nodes} hosts x {args.ppn} ranks; link {d['link_Bps'] / 1e6:.2f} MB/s, "
          f"{d['link_lat_s'] * 1e6:.2f} us (x2 per message); loopback {d['loopback_Bps'] / 1e9:.3f} GB/s, "
          f"{d['loopback_lat_s'] * 1e6:.2f} us; receive overhead node {d['recv_overhead_s'][0] * 1e6:.2f} us, "
          f"network {d['recv_overhead_s'][1] * 1e6:.2f} us")
    print(f"wrote {xml_path}, {json_path}")
    print("agx-sim arguments (from the repository root): --ppn", args.ppn, " ".join(sim_args))
    print("SMPI settings:", " ".join(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
