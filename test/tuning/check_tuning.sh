#!/usr/bin/env bash
# agx-tune writes a tuning file that agx reads back; a measured winner in a tuning file
# decides `auto` (shown by agx-info); a malformed file is an error naming its line; bad
# command-line values of agx-tune and agx-info are refused.
set -euo pipefail
tools=$1 mpirun=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
run() { "$mpirun" --oversubscribe "$@"; }

# 1. A real measurement, small: the file must parse and carry the machine and the command.
# --max-bytes takes agx-bench's sizes: 1K is 1024 (the last `best` size class below).
run -np 3 "$tools/agx-tune" --crossovers --max-bytes 1K --output "$scratch/tune.txt" >/dev/null
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

# 4. Groups of nodes (group.nodes, group.beta_s_per_byte): 8 virtual nodes of one rank in
# groups of 4 joined by a thin link. Recursive doubling's last round sends the whole
# group's bytes over that link, so its prediction must rise by far more than the ring's
# (one message per round crosses a group boundary), and auto must leave direct (every rank
# sends to every other group: 16 messages share each link).
printf 'agx-tuning 1\n' > "$scratch/flat.txt"
printf 'agx-tuning 1\ngroup.nodes 4\ngroup.beta_s_per_byte 1e-9\n' > "$scratch/groups.txt"
flat=$(AGX_VIRTUAL_NODE_SIZE=1 AGX_TUNING_FILE="$scratch/flat.txt" run -np 8 "$tools/agx-info" --sizes 65536:65536)
grouped=$(AGX_VIRTUAL_NODE_SIZE=1 AGX_TUNING_FILE="$scratch/groups.txt" run -np 8 "$tools/agx-info" --sizes 65536:65536)
echo "$grouped" | grep -q 'groups: 4 nodes each, 1.000000 GB/s between two groups' \
  || { echo "agx-info does not show the groups"; echo "$grouped"; exit 1; }
echo "$flat" | grep -q 'groups: none' || { echo "groups without group.nodes"; echo "$flat"; exit 1; }
us() { echo "$1" | grep -E '^ +65536 B' | grep -oE "\*?$2 [0-9.]+" | awk '{print $2}'; }
awk -v f="$(us "$flat" recursive_doubling)" -v g="$(us "$grouped" recursive_doubling)" \
  'BEGIN { exit !(f > 0 && g > 2 * f) }' || { echo "groups did not raise recursive doubling"; echo "$flat"; echo "$grouped"; exit 1; }
awk -v rf="$(us "$flat" ring)" -v rg="$(us "$grouped" ring)" -v df="$(us "$flat" recursive_doubling)" \
  -v dg="$(us "$grouped" recursive_doubling)" 'BEGIN { exit !(rf > 0 && dg / df > 2 * (rg / rf)) }' \
  || { echo "groups raised the ring as much as recursive doubling"; echo "$flat"; echo "$grouped"; exit 1; }
echo "$flat" | grep -E '^ +65536 B' | grep -q '\*direct' || { echo "flat: auto should pick direct"; echo "$flat"; exit 1; }
if echo "$grouped" | grep -E '^ +65536 B' | grep -q '\*direct'; then
  echo "groups: auto still picks direct"; echo "$grouped"; exit 1
fi
# Bad values are refused with a message and exit status 2 (before: agx-info read --sizes
# 8:x as 8:0; agx-tune read --max-bytes 1x as 1, and --max-bytes x threw out of main).
for bad in "agx-tune --max-bytes 1x|agx-tune: --max-bytes: not a size: '1x'" \
           "agx-tune --no-such-option|agx-tune: The following argument was not expected: --no-such-option" \
           "agx-info --sizes 8:x|agx-info: --sizes: not a number: 'x'" \
           "agx-info --call 12k|agx-info: --call: not a number: '12k'"; do
  words=(${bad%%|*})
  rc=0
  run -np 1 "$tools/${words[0]}" "${words[@]:1}" > "$scratch/bad.out" 2>&1 || rc=$?
  if [ "$rc" -ne 2 ] || ! grep -qF -- "${bad#*|}" "$scratch/bad.out"; then
    echo "${words[*]}: exit status $rc (want 2) and message '${bad#*|}'"; cat "$scratch/bad.out"; exit 1
  fi
done
echo "tuning checks passed"
