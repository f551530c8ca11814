# A private, single-node Slurm for tests (sourced): its own munged with a fresh key,
# slurmctld and slurmd on free (or given) ports, every file under one short directory.
# Facts behind the configuration: /work/shared/notes/local-slurm.md (mirrored in
# docs/benchmarks.md). Functions:
#
#   slurm_up          starts it in $SLURM_DIR (made with mktemp -d /tmp/agx-slurm.XXXX);
#                     exports SLURM_CONF. Exits 77 (meson's SKIP) with the reason when this
#                     machine cannot run Slurm.
#   slurm_down        cancels the jobs, stops only the daemons slurm_up started (and
#                     slurmstepd processes of this instance), removes $SLURM_DIR
#                     (kept when AGX_SLURM_KEEP=1).
#   slurm_logs        prints the tails of the daemon logs.
#
# Settings: AGX_SLURM_PORTS="<slurmctld port> <slurmd port>" (default: two free ports),
# AGX_SLURM_CPUS (CPUs declared for the node, default 8).

SLURM_DIR=""
slurm_pids=()

slurm_skip() {
  echo "SKIP: $*"
  exit 77
}

slurm_logs() {
  local f
  for f in "$SLURM_DIR"/log/*.log; do
    [ -f "$f" ] || continue
    echo "--- $f (last 25 lines)"
    tail -n 25 "$f"
  done
}

slurm_free_ports() {
  python3 - <<'PY'
import socket
socks = []
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# slurm_wait SECONDS COMMAND...: retries COMMAND every 0.2 s; false after SECONDS.
slurm_wait() {
  local end=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}

slurm_node_idle() {
  [ "$(sinfo -h -N -o %t 2>/dev/null)" = "idle" ]
}

slurm_up() {
  local cmd missing=()
  for cmd in munged munge unmunge slurmctld slurmd sbatch srun scontrol sinfo squeue scancel python3; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
  done
  [ ${#missing[@]} -eq 0 ] ||
    slurm_skip "Slurm is not installed (missing ${missing[*]}; scripts/setup.sh installs slurmctld slurmd slurm-client munge)"
  [ "$(id -u)" -eq 0 ] || slurm_skip "a private slurmd needs root (SlurmdUser=root), this is uid $(id -u)"

  SLURM_DIR=$(mktemp -d /tmp/agx-slurm.XXXX)
  local S=$SLURM_DIR host ports ctld_port slurmd_port
  host=$(hostname -s)
  ports=${AGX_SLURM_PORTS:-$(slurm_free_ports)}
  read -r ctld_port slurmd_port <<< "$ports"
  mkdir -p "$S"/{etc,munge,state,spool,log,pmixcli,tmp}
  chmod 0755 "$S" "$S/munge"

  # munge: a fresh key, our own socket.
  dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$S/munge/munge.key"
  munged -F --force --key-file="$S/munge/munge.key" --socket="$S/munge/munge.socket" \
    --pid-file="$S/munge/munged.pid" --seed-file="$S/munge/munged.seed" \
    --log-file="$S/log/munged.log" >>"$S/log/munged.log" 2>&1 &
  slurm_pids+=($!)
  if ! slurm_wait 10 bash -c "munge -n -S '$S/munge/munge.socket' | unmunge -S '$S/munge/munge.socket'"; then
    slurm_logs
    slurm_skip "munged did not start"
  fi

  cat > "$S/etc/slurm.conf" <<CONF
ClusterName=agxtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
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
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
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
NodeName=$host NodeAddr=127.0.0.1 CPUs=${AGX_SLURM_CPUS:-8} State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  echo "PMIxCliTmpDirBase=$S/pmixcli" > "$S/etc/mpi.conf"
  export SLURM_CONF="$S/etc/slurm.conf"

  slurmctld -D -i -f "$SLURM_CONF" >>"$S/log/slurmctld.out" 2>&1 &
  slurm_pids+=($!)
  slurmd -D -f "$SLURM_CONF" -N "$host" >>"$S/log/slurmd.out" 2>&1 &
  slurm_pids+=($!)
  if ! slurm_wait 30 slurm_node_idle; then
    sinfo 2>&1 || true
    cat "$S"/log/*.out 2>/dev/null || true
    slurm_logs
    slurm_skip "the private slurmctld/slurmd did not bring the node up (ports $ctld_port/$slurmd_port)"
  fi
  echo "private Slurm up in $S: node $host, ports $ctld_port/$slurmd_port, pids ${slurm_pids[*]}"
}

# PIDs of slurmstepd processes of this instance (their environment names our SLURM_CONF).
slurm_own_stepds() {
  local p
  for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
    { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$SLURM_CONF" && echo "$p"
  done
  return 0
}

# True once PID has exited (gone, or a zombie waiting for our `wait`).
slurm_exited() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null || true)
  [ -z "$state" ] || [ "${state#Z}" != "$state" ]
}

slurm_down() {
  [ -n "$SLURM_DIR" ] || return 0
  if [ ${#slurm_pids[@]} -gt 0 ]; then
    scancel --quiet --user="$(id -un)" >/dev/null 2>&1 || true
    # shellcheck disable=SC2016
    slurm_wait 15 bash -c '[ -z "$(squeue -h 2>/dev/null)" ]' || true
    local stepds p
    stepds=$(slurm_own_stepds)
    # Daemons in reverse start order: slurmd, slurmctld, munged.
    for ((i = ${#slurm_pids[@]} - 1; i >= 0; i--)); do kill -TERM "${slurm_pids[i]}" 2>/dev/null || true; done
    for p in "${slurm_pids[@]}"; do
      slurm_wait 10 slurm_exited "$p" || kill -KILL "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    done
    for p in $stepds $(slurm_own_stepds); do kill -KILL "$p" 2>/dev/null || true; done
    slurm_pids=()
  fi
  if [ "${AGX_SLURM_KEEP:-0}" = 1 ]; then
    echo "kept $SLURM_DIR (AGX_SLURM_KEEP=1)"
  else
    rm -rf "$SLURM_DIR"
  fi
  SLURM_DIR=""
}
