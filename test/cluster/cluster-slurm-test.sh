#!/usr/bin/env bash
# A multi-node Slurm on the cluster (docs/cluster.md): a 4-node cluster
# (scripts/cluster/cluster.sh), slurmctld on node 0, one slurmd in every node's network
# and UTS namespaces (its own node name, address, spool, log and PMIx directory), its own
# munged with a fresh key; then scripts/slurm/*.sbatch with `sbatch --wait -N 2..4`,
# submitted from node 0, each job's exit code, output and CSV checked. Stops only what it
# started and removes the cluster (trap). Exit 77 (SKIP) with the reason when this
# machine has no namespaces or no Slurm.
#
#   cluster-slurm-test.sh SCRIPTS_DIR AGX_BENCH AGX_SOURCE_ROOT
set -euo pipefail
scripts=$(realpath "$1")
bench=$(realpath "$2")
root=$(realpath "$3")
export AGX_CLUSTER=${AGX_CLUSTER:-agxt} AGX_CLUSTER_NET=${AGX_CLUSTER_NET:-10.213.1}
cluster=$scripts/cluster.sh
K=4

rc=0; "$cluster" check || rc=$?
[ $rc = 0 ] || exit $rc
for cmd in munged munge unmunge slurmctld slurmd sbatch sinfo squeue scancel; do
  command -v "$cmd" >/dev/null 2>&1 ||
    { echo "SKIP: Slurm is not installed ($cmd missing; scripts/setup.sh installs slurmctld slurmd slurm-client munge)"; exit 77; }
done

S=$(mktemp -d /tmp/agxcs.XXXX)  # short: unix socket paths must stay under 108 characters
pids=()
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
on0() { "$cluster" exec "$AGX_CLUSTER-n0" "$@"; }  # a client on the first node

stop() {
  local status=$? p
  if [ ${#pids[@]} -gt 0 ]; then
    on0 scancel --quiet --user=root >/dev/null 2>&1 || true
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
      for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    done
  fi
  "$cluster" down || status=1  # also ends any slurmstepd left inside the nodes
  [ -z "$(ip netns list | awk -v p="^$AGX_CLUSTER-" '$1 ~ p')" ] || { echo "FAIL: namespaces left"; status=1; }
  rm -rf "$S"
  exit $status
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$cluster" up -k $K -p 10g
mapfile -t nodes < <("$cluster" nodes)
net=$AGX_CLUSTER_NET

mkdir -p "$S"/{etc,munge,state,log,results,tmp}
chmod 0755 "$S" "$S/munge"
dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$S/munge/munge.key"
munged -F --force --key-file="$S/munge/munge.key" --socket="$S/munge/munge.socket" \
  --pid-file="$S/munge/munged.pid" --seed-file="$S/munge/munged.seed" \
  --log-file="$S/log/munged.log" >>"$S/log/munged.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
  munge -n -S "$S/munge/munge.socket" 2>/dev/null | unmunge -S "$S/munge/munge.socket" >/dev/null 2>&1 && break
  sleep 0.2
done

{
  cat <<CONF
ClusterName=agxcluster
SlurmctldHost=${nodes[0]}($net.1)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
SchedulerParameters=batch_sched_delay=0
MinJobAge=5
EnforcePartLimits=ALL
ReturnToService=2
KillWait=5
MailProg=/bin/true
MpiDefault=pmix
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$S/log/jobcomp.txt
SlurmdParameters=config_overrides
CONF
  for ((i = 0; i < K; i++)); do echo "NodeName=${nodes[i]} NodeAddr=$net.$((i + 1)) CPUs=2 State=UNKNOWN"; done
  echo "PartitionName=debug Nodes=$(IFS=,; echo "${nodes[*]}") Default=YES MaxTime=INFINITE State=UP"
} > "$S/etc/slurm.conf"
echo "PMIxCliTmpDirBase=$S/pmixcli" > "$S/etc/mpi.conf"
export SLURM_CONF=$S/etc/slurm.conf

# slurmctld on node 0. The daemons enter the node's network and UTS namespaces with
# nsenter, not `ip netns exec`, whose fresh /sys hides /sys/fs/cgroup from slurmd.
nsenter --net="/run/netns/${nodes[0]}" --uts="/run/agx-cluster/$AGX_CLUSTER/${nodes[0]}.uts" -- \
  slurmctld -D -i -f "$SLURM_CONF" >>"$S/log/slurmctld.out" 2>&1 &
pids+=($!)
# One slurmd per node, each with its own copy of the configuration, so that its mpi.conf
# names its own PMIx directory (one directory shared by the nodes collides: "File exists").
for n in "${nodes[@]}"; do
  mkdir -p "$S/etc/$n" "$S/pmixcli/$n" "$S/spool-$n"
  cp "$S/etc/slurm.conf" "$S/etc/$n/"
  echo "PMIxCliTmpDirBase=$S/pmixcli/$n" > "$S/etc/$n/mpi.conf"
  nsenter --net="/run/netns/$n" --uts="/run/agx-cluster/$AGX_CLUSTER/$n.uts" -- \
    slurmd -D -f "$S/etc/$n/slurm.conf" -N "$n" >>"$S/log/slurmd-$n.out" 2>&1 &
  pids+=($!)
done
up=0
for _ in $(seq 100); do
  [ "$(on0 sinfo -h -N -o %t 2>/dev/null | sort -u)" = idle ] && { up=1; break; }
  sleep 0.2
done
if [ $up = 0 ]; then
  on0 sinfo -N 2>&1 || true
  tail -n 20 "$S"/log/*.log
  echo "SKIP: the cluster's Slurm did not bring its $K nodes up"
  exit 77
fi
echo "Slurm up: slurmctld on ${nodes[0]}, slurmd on ${nodes[*]}"

export AGX_ROOT=$root AGX_BENCH=$bench AGX_RESULTS=$S/results TMPDIR=$S/tmp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
# Open MPI's mpirun inside a job: TCP between the nodes over their eth0.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0
small="--max-bytes 64K --factor 16 --passes 2 --batch-seconds 0.002 --algos auto,ring,hierarchical"

submit() {  # submit NAME SCRIPT [sbatch options...]: one job to its end; sets $out
  local name=$1 script=$2 rc=0 t0=$SECONDS
  shift 2
  out="$S/$name.out"
  (cd "$S" && timeout 120 "$cluster" exec "${nodes[0]}" sbatch --wait --quiet --output="$out" "$@" \
     "$root/scripts/slurm/$script") || rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s"
  sed 's/^/   | /' "$out" 2>/dev/null | tail -n 15 || true
  [ "$rc" != 124 ] || { fail "$name: sbatch --wait timed out"; on0 scancel --quiet --user=root || true; return; }
  [ "$rc" = 0 ] || fail "$name: exit code $rc"
}

check_csv() {  # check_csv CSV RANKS NODES
  python3 - "$@" <<'PY' || fail "CSV check of $1"
import csv, sys
path, ranks, nodes = sys.argv[1:4]
meta, lines = {}, []
for line in open(path):
    if line.startswith("#"):
        k, _, v = line[1:].partition(":"); meta[k.strip()] = v.strip()
    elif line.strip():
        lines.append(line)
rows = list(csv.DictReader(lines))
assert meta.get("ranks") == ranks, f"ranks {meta.get('ranks')} != {ranks}"
assert meta.get("nodes") == nodes, f"nodes {meta.get('nodes')} != {nodes}"
assert rows, "no rows"
bad = [r for r in rows if r["verified"] != "ok"]
assert not bad, f"{len(bad)} rows not ok: {bad[:2]}"
assert {r["candidate"] for r in rows} >= {"mpi", "auto", "hierarchical"}, "candidates missing"
print(f"   {path}: {len(rows)} rows ok, N={ranks} on {nodes} nodes")
PY
}

result_dir() { local d=("$AGX_RESULTS"/*-"$1"-job*); [ -d "${d[0]}" ] && echo "${d[0]}"; }

# 1. sweep on 2 nodes x 1, srun --mpi=pmix
AGX_LAUNCHER=srun AGX_BENCH_ARGS="$small" submit sweep-srun sweep.sbatch --nodes=2 --ntasks-per-node=1
if d=$(result_dir sweep); then check_csv "$d/bench.csv" 2 2; else fail "sweep-srun: no result folder"; fi
rm -rf "${AGX_RESULTS:?}"/*

# 2. sweep on 3 nodes x 2, mpirun inside the job (Open MPI launches through Slurm)
AGX_LAUNCHER=mpirun AGX_BENCH_ARGS="$small" submit sweep-mpirun sweep.sbatch --nodes=3 --ntasks-per-node=2
if d=$(result_dir sweep); then check_csv "$d/bench.csv" 6 3; else fail "sweep-mpirun: no result folder"; fi
rm -rf "${AGX_RESULTS:?}"/*

# 3. agx against the MPI library on 1, 2 and 4 nodes of a 4-node allocation
AGX_LAUNCHER=srun AGX_BENCH_ARGS="$small" submit compare-nodes compare-nodes.sbatch --nodes=4 --ntasks-per-node=1
if d=$(result_dir nodes); then
  for k in 1 2 4; do check_csv "$d/bench-nodes$k.csv" $k $k; done
  grep -q "vs_mpi" "$d/summary.txt" || fail "compare-nodes: no summary table"
else
  fail "compare-nodes: no result folder"
fi

[ "$(on0 squeue -h | wc -l)" -eq 0 ] || fail "jobs left in the queue"
if [ $failures -gt 0 ]; then
  tail -n 20 "$S"/log/*.log
  echo "cluster slurm: $failures failure(s)"
  exit 1
fi
echo "cluster slurm: all jobs ran on $K nodes and were checked"
