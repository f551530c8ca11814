#!/usr/bin/env bash
# agx-tune writes a tuning file that agx reads back; a measured winner in a tuning file
# decides `auto` (shown by agx-info); a malformed file is an error naming its line.
set -euo pipefail
tools=$1 mpirun=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
run() { "$mpirun" --oversubscribe "$@"; }

# 1. A real measurement, small: the file must parse and carry the machine and the command.
run -np 3 "$tools/agx-tune" --crossovers --max-bytes 1024 --output "$scratch/tune.txt" >/dev/null
grep -q '^agx-tuning 1$' "$scratch/tune.txt"
grep -q '^command agx-tune --crossovers' "$scratch/tune.txt"
grep -q '^best 3 3 1024 ' "$scratch/tune.txt"
out=$(AGX_TUNING_FILE="$scratch/tune.txt" run -np 3 "$tools/agx-info" --sizes 64:64)
echo "$out" | grep -q "tuning: $scratch/tune.txt" || { echo "agx-info did not load the file"; echo "$out"; exit 1; }

# 2. A measured winner decides auto for its shape and size class.
cat > "$scratch/ring.txt" <<TXT
agx-tuning 1
best 3 3 1000000 ring
TXT
out=$(AGX_TUNING_FILE="$scratch/ring.txt" run -np 3 "$tools/agx-info" --sizes 64:4096)
echo "$out" | grep -E '^ +64 B' | grep -q '\*ring' || { echo "auto did not take the measured winner"; echo "$out"; exit 1; }
echo "$out" | grep -q 'measured fastest' || { echo "no reason given"; exit 1; }
# ...but not for another number of ranks (the file says nothing about 2 ranks).
out=$(AGX_TUNING_FILE="$scratch/ring.txt" run -np 2 "$tools/agx-info" --sizes 64:64)
echo "$out" | grep -q 'lowest predicted time' || { echo "a winner for 3 ranks was used at 2"; echo "$out"; exit 1; }

# 3. A malformed file is an error on every rank, naming the line.
printf 'agx-tuning 1\nnode.alpha_s -3\n' > "$scratch/bad.txt"
if AGX_TUNING_FILE="$scratch/bad.txt" run -np 2 "$tools/agx-info" --sizes 8:8 > "$scratch/bad.out" 2>&1; then
  echo "a malformed tuning file was accepted"; exit 1
fi
grep -q 'line 2' "$scratch/bad.out" || { echo "error does not name the line"; cat "$scratch/bad.out"; exit 1; }
echo "tuning checks passed"
