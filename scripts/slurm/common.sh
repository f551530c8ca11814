# Sourced by agx's sbatch scripts (sweep.sbatch, compare-nodes.sbatch, tune.sbatch):
# finds the tools, makes the dated result folder, launches MPI jobs. docs/benchmarks.md
# ("Running under Slurm") explains every setting:
#
#   AGX_LAUNCHER     srun (default: srun --mpi=pmix) or mpirun
#   AGX_ROOT         agx source tree (default: the folder sbatch was called from)
#   AGX_BENCH        agx-bench to run (default: $AGX_ROOT/build/tools/agx-bench, else PATH)
#   AGX_RESULTS      where result folders go (default: $AGX_ROOT/results/slurm)
#   AGX_MPIRUN       the mpirun command (default: mpirun); AGX_MPIRUN_ARGS: extra arguments
#   AGX_SRUN_ARGS    extra srun arguments
#
# sbatch copies a script before running it, so the scripts find this file through
# AGX_ROOT / SLURM_SUBMIT_DIR, not through their own path.

AGX_ROOT=${AGX_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}
AGX_LAUNCHER=${AGX_LAUNCHER:-srun}
AGX_RESULTS=${AGX_RESULTS:-$AGX_ROOT/results/slurm}
AGX_MPIRUN=${AGX_MPIRUN:-mpirun}

agx_die() {
  echo "agx: $*" >&2
  exit 2
}

# agx_tool NAME VAR: the path of tool NAME: $VAR if set, else the build tree, else PATH.
agx_tool() {
  local name=$1 given=${!2:-}
  if [ -n "$given" ]; then
    [ -x "$given" ] && { echo "$given"; return 0; }
    return 1
  fi
  if [ -x "$AGX_ROOT/build/tools/$name" ]; then echo "$AGX_ROOT/build/tools/$name"; return 0; fi
  command -v "$name" 2>/dev/null
}

# agx_result_dir LABEL: makes and prints <results>/<date>-<LABEL>-job<id>, with job.txt
# (job, nodes, launcher, tools) inside.
agx_result_dir() {
  local dir
  dir="$AGX_RESULTS/$(date +%Y%m%d-%H%M%S)-$1-job${SLURM_JOB_ID:-none}"
  mkdir -p "$dir"
  {
    echo "job: ${SLURM_JOB_ID:-none} (${SLURM_JOB_NAME:-}) on ${SLURM_JOB_NUM_NODES:-?} node(s): ${SLURM_JOB_NODELIST:-$(hostname)}"
    echo "tasks: ${SLURM_NTASKS:-?}, per node: ${SLURM_TASKS_PER_NODE:-?}"
    echo "launcher: $AGX_LAUNCHER"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "agx root: $AGX_ROOT"
    [ -n "${SLURM_JOB_ID:-}" ] && scontrol show job "$SLURM_JOB_ID" 2>/dev/null
  } > "$dir/job.txt"
  echo "$dir"
}

# agx_launch NODES TASKS COMMAND...: runs COMMAND as an MPI job of TASKS ranks on the
# first NODES nodes of the allocation, with srun --mpi=pmix or mpirun.
agx_launch() {
  local nodes=$1 tasks=$2
  shift 2
  case "$AGX_LAUNCHER" in
    srun)
      # shellcheck disable=SC2086
      srun --mpi=pmix --nodes="$nodes" --ntasks="$tasks" ${AGX_SRUN_ARGS:-} "$@" ;;
    mpirun)
      local hosts per_node
      per_node=$(( (tasks + nodes - 1) / nodes ))
      hosts=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-$(hostname)}" | head -n "$nodes" |
              sed "s/\$/:$per_node/" | paste -sd, -)
      # shellcheck disable=SC2086
      $AGX_MPIRUN -np "$tasks" --host "$hosts" ${AGX_MPIRUN_ARGS:-} "$@" ;;
    *) agx_die "AGX_LAUNCHER must be srun or mpirun, not '$AGX_LAUNCHER'" ;;
  esac
}

# agx_check_csv FILE: fails unless FILE has data rows and every row is verified ok or
# skip. (srun can exit 0 when a step failed to launch: the CSV is the proof.)
agx_check_csv() {
  local csv=$1
  [ -s "$csv" ] || agx_die "no results in $csv: the MPI job did not run (see the job output)"
  awk -F, -v f="$csv" '
    /^#/ { next }
    !col { for (i = 1; i <= NF; i++) if ($i == "verified") col = i; next }
    { rows++; if ($col != "ok" && $col != "skip") bad++ }
    END {
      if (!col || rows == 0) { print "agx: " f ": no data rows" > "/dev/stderr"; exit 1 }
      if (bad) { print "agx: " f ": " bad " of " rows " rows WRONG or failed" > "/dev/stderr"; exit 1 }
      print "agx: " f ": " rows " rows, all verified"
    }' "$csv"
}

# agx_plot DIR CSV...: PNGs into DIR with agx-plot when it and matplotlib are there.
agx_plot() {
  local dir=$1 plot
  shift
  plot=$(command -v agx-plot || true)
  [ -x "$AGX_ROOT/tools/agx-plot" ] && plot="$AGX_ROOT/tools/agx-plot"
  if [ -z "$plot" ]; then echo "agx: agx-plot not found, no figures"; return 0; fi
  "$plot" -o "$dir" "$@" || echo "agx: agx-plot failed (python3-matplotlib missing?), no figures"
}
