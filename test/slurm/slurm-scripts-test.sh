#!/usr/bin/env bash
# Tests scripts/slurm/ for real: starts a private Slurm (private-slurm.sh), submits
#   sweep.sbatch with srun --mpi=pmix and with mpirun (and once with a corrupted
#   result, which must fail the job), compare-nodes.sbatch, and
#   tune.sbatch (without agx-tune: must fail with its message; with it: must write a file)
# with `sbatch --wait` under a timeout, and checks each job's exit code, its output and
# its CSV. Stops only what it started and removes its directory (trap on exit).
# Exit 77 (SKIP) with the reason when this machine cannot run Slurm.
#
#   slurm-scripts-test.sh <agx-bench> <agx source root>
set -euo pipefail
bench=$(realpath "$1")
root=$(realpath "$2")
here=$(dirname "$(realpath "$0")")
# shellcheck source=private-slurm.sh
source "$here/private-slurm.sh"
trap slurm_down EXIT
slurm_up

S=$SLURM_DIR
export AGX_ROOT=$root AGX_BENCH=$bench AGX_RESULTS=$S/results TMPDIR=$S/tmp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The node declares 8 CPUs on a smaller machine: ranks must yield when they wait, or
# busy-polling ranks share the cores in scheduler time slices (milliseconds per call).
export OMPI_MCA_mpi_yield_when_idle=1
small="--max-bytes 64K --factor 16 --passes 2 --batch-seconds 0.002 --algos auto,ring,bruck"
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# submit NAME EXPECTED_RC SCRIPT [sbatch options...]: runs one job to its end; sets $out.
submit() {
  local name=$1 want=$2 script=$3 rc=0
  shift 3
  out="$S/$name.out"
  local t0=$SECONDS
  (cd "$S" && timeout 100 sbatch --wait --quiet --output="$out" "$@" "$root/scripts/slurm/$script") || rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s (want $want)"
  sed 's/^/   | /' "$out" 2>/dev/null | tail -n 40 || true
  [ "$rc" = 124 ] && { fail "$name: sbatch --wait timed out"; scancel --quiet --user="$(id -un)" || true; return; }
  [ "$rc" = "$want" ] || fail "$name: exit code $rc, expected $want"
}

# result_dir LABEL: prints the one result folder of a label (job id in its name).
result_dir() {
  local dirs=("$AGX_RESULTS"/*-"$1"-job*)
  if [ ${#dirs[@]} -ne 1 ] || [ ! -d "${dirs[0]}" ]; then
    echo "no single result folder for $1: ${dirs[*]}" >&2
    return 1
  fi
  echo "${dirs[0]}"
}

# check_csv CSV RANKS: rows present, all verified ok, metadata recorded, N as asked.
check_csv() {
  python3 - "$1" "$2" <<'PY' || fail "CSV check of $1"
import csv, sys
path, ranks = sys.argv[1], sys.argv[2]
meta, lines = {}, []
for line in open(path):
    if line.startswith("#"):
        k, _, v = line[1:].partition(":"); meta[k.strip()] = v.strip()
    elif line.strip():
        lines.append(line)
rows = list(csv.DictReader(lines))
for key in ("agx_version", "hostname", "cpu_model", "cores", "mpi_library", "ranks", "nodes", "ranks_per_node_max"):
    assert meta.get(key), f"metadata {key} missing"
assert meta["ranks"] == ranks, f"ranks {meta['ranks']} != {ranks}"
assert rows, "no rows"
bad = [r for r in rows if r["verified"] != "ok"]
assert not bad, f"{len(bad)} rows not ok: {bad[:2]}"
assert {r["candidate"] for r in rows} >= {"mpi", "auto"}, "candidates missing"
print(f"   {path}: {len(rows)} rows ok, N={ranks}, {meta['mpi_library'].split(',')[0]}")
PY
}

# 1. sweep, srun --mpi=pmix
AGX_LAUNCHER=srun AGX_BENCH_ARGS="$small --place both --forms regular,ramp" \
  submit sweep-srun 0 sweep.sbatch --ntasks=3 --nodes=1
if d=$(result_dir sweep); then
  grep -q "agx: done, results in $d" "$out" || fail "sweep-srun: no 'done' line"
  grep -q "ramp, in_place" "$d/table.txt" || fail "sweep-srun: table lacks the ramp in-place section"
  [ -s "$d/bench.json" ] || fail "sweep-srun: no JSON"
  grep -q "launcher: srun" "$d/job.txt" || fail "sweep-srun: job.txt"
  check_csv "$d/bench.csv" 3
else
  fail "sweep-srun: no result folder"
fi
rm -rf "${AGX_RESULTS:?}"/*

# 2. sweep, mpirun (job name default: agx-sweep)
AGX_LAUNCHER=mpirun AGX_BENCH_ARGS="$small" submit sweep-mpirun 0 sweep.sbatch --ntasks=4 --nodes=1
if d=$(result_dir sweep); then
  grep -q "launcher: mpirun" "$d/job.txt" || fail "sweep-mpirun: job.txt"
  check_csv "$d/bench.csv" 4
else
  fail "sweep-mpirun: no result folder"
fi

# 2b. a wrong result must fail the job, never pass as fast (agx-bench --corrupt)
AGX_LAUNCHER=srun AGX_BENCH_ARGS="--sizes 64 --passes 1 --batch-seconds 0.001 --algos ring --corrupt ring" \
  submit sweep-wrong 1 sweep.sbatch --ntasks=2 --nodes=1
grep -q "WRONG" "$out" || fail "sweep-wrong: WRONG not reported"
rm -rf "${AGX_RESULTS:?}"/*

# 3. agx against the MPI library across node counts (one node here)
AGX_LAUNCHER=srun AGX_BENCH_ARGS="$small" submit compare-nodes 0 compare-nodes.sbatch --nodes=1 --ntasks-per-node=2
if d=$(result_dir nodes); then
  check_csv "$d/bench-nodes1.csv" 2
  grep -q "vs_mpi" "$d/summary.txt" || fail "compare-nodes: no summary table"
  [ "$(grep -c ',auto,' "$d/summary.csv")" -gt 0 ] || fail "compare-nodes: summary.csv lacks auto rows"
else
  fail "compare-nodes: no result folder"
fi

# 4. tuning: agx-tune absent must fail clearly; present must write a tuning file
AGX_TUNE=$S/no-such-agx-tune submit tune-absent 3 tune.sbatch --ntasks=2 --nodes=1
grep -q "agx-tune not found" "$out" || fail "tune-absent: message missing"
if [ -x "$(dirname "$bench")/agx-tune" ]; then
  AGX_TUNE="$(dirname "$bench")/agx-tune" AGX_TUNE_ARGS="--max-bytes 4096" submit tune 0 tune.sbatch --ntasks=2 --nodes=1
  if d=$(result_dir tune); then [ -s "$d/agx-tuning.conf" ] || fail "tune: no tuning file"; else fail "tune: no result folder"; fi
else
  echo "== tune with agx-tune: not built here, only the absent case was tested"
fi

[ "$(squeue -h | wc -l)" -eq 0 ] || fail "jobs left in the queue"
if [ $failures -gt 0 ]; then
  slurm_logs
  echo "slurm scripts: $failures failure(s)"
  exit 1
fi
echo "slurm scripts: all jobs ran and checked"
