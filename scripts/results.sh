#!/usr/bin/env bash
# Reruns the tables of docs/results.md ("Current results"): for each configuration named
# (all of them without arguments), scripts/bench.sh with the interposer preloaded, every
# forced algorithm, 1 B to 16 MiB per rank (x4), window method, 5 interleaved passes, out
# of place and in place; then scripts/results-table.py's markdown tables and agx-plot's
# PNGs. Everything lands in one folder (AGX_RESULTS_DIR, default results/tables-<date>):
# <name>.csv, <name>.log, the PNGs and tables.md (each table headed by the load average
# before its run). Configurations:
#   openmpi-n2 openmpi-n3 openmpi-n4 mpich-n2 mpich-n4   heap receive buffers
#   openmpi-n2-alloc openmpi-n4-alloc                    receive buffers from MPI_Alloc_mem
# Extra agx-bench options go after '--', e.g. scripts/results.sh openmpi-n2 -- --passes 9.
# Run it on an otherwise idle machine: the figures are ratios to the MPI library's call
# in the same run, but a busy core still skews both.
set -euo pipefail
cd "$(dirname "$0")/.."
all=(openmpi-n2 openmpi-n3 openmpi-n4 mpich-n2 mpich-n4 openmpi-n2-alloc openmpi-n4-alloc)
names=() extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; extra=("$@"); break ;;
    *) names+=("$1"); shift ;;
  esac
done
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")
out=${AGX_RESULTS_DIR:-results/tables-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
common=(--algos all --max-bytes 16M --factor 4 --method window --passes 5 --place both)
for name in "${names[@]}"; do
  [[ $name =~ ^(openmpi|mpich)-n([0-9]+)(-alloc)?$ ]] ||
    { echo "results.sh: unknown configuration '$name' (one of: ${all[*]})" >&2; exit 2; }
  mpi=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]} alloc=()
  [ -z "${BASH_REMATCH[3]}" ] || alloc=(--alloc mpi)
  log="$out/$name.log"
  echo "results.sh: $name ..."
  AGX_BENCH_MPI=$mpi AGX_BENCH_RANKS=$n \
    scripts/bench.sh "${common[@]}" "${alloc[@]}" "${extra[@]}" >"$log" 2>&1 ||
    { echo "results.sh: $name failed, see $log" >&2; exit 1; }
  mv "$(sed -n 's/^CSV: //p' "$log")" "$out/$name.csv"
  {
    echo "### $name"
    echo
    echo "Load average (1, 5, 15 min) before the run: $(sed -n 's/^# load average before: //p' "$log")."
    echo
    python3 scripts/results-table.py "$out/$name.csv" --place both
    echo
  } >>"$out/tables.md"
  /usr/bin/env python3 -c 'import matplotlib' 2>/dev/null && py=python3 || py=/usr/bin/python3
  $py tools/agx-plot "$out/$name.csv" -o "$out/$name" >/dev/null
done
echo "results.sh: tables in $out/tables.md"
