#!/usr/bin/env bash
# Builds agx-sim, agx's executor and planners against SimGrid SMPI (smpicxx), from the
# same sources as libagx: lib/core's schedule, planner, message, executor (with its
# timeout and integrity checks and CRC32C), validator, cost model and config, lib/ring,
# lib/rd, lib/direct, plus tools/sim (driver and the
# point-to-point form of the hierarchical algorithm). lib/hier (shared memory, hwloc),
# lib/pmpi and lib/core's selection/communicator files are not compiled here.
#
#   tools/sim/build.sh [OUTDIR]      # default build-sim/; prints the binary's path
# Exit status 77 when smpicxx is missing (apt-get install libsimgrid-dev simgrid).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/build-sim}"
if ! command -v smpicxx >/dev/null 2>&1; then
  echo "tools/sim/build.sh: smpicxx not found (Debian: apt-get install libsimgrid-dev simgrid)" >&2
  exit 77
fi
mkdir -p "$out/obj"
sources=(lib/core/schedule.cpp lib/core/planner.cpp lib/core/registry.cpp lib/core/message.cpp lib/core/executor.cpp
         lib/core/timeout.cpp lib/core/integrity.cpp lib/core/crc32c.cpp
         lib/core/validator.cpp lib/core/cost_model.cpp lib/core/config.cpp
         lib/direct/*.cpp lib/ring/*.cpp lib/rd/*.cpp lib/hier/node_planner.cpp
         tools/sim/hier_p2p.cpp tools/sim/driver.cpp)
flags=(-std=c++20 -O2 -Wall -Wextra -I"$root/include" -I"$root/lib" -I"$root/tools" -I"$root/tools/sim")
objs=()
pids=()
for s in "${sources[@]}"; do
  for f in "$root"/$s; do
    o="$out/obj/$(echo "${f#"$root"/}" | tr / _).o"
    objs+=("$o")
    # Rebuild only what changed (sources or the headers they may include).
    if [ ! -f "$o" ] || [ -n "$(find "$f" "$root/lib/core" "$root/lib/hier/wait.hpp" "$root/include/agx" "$root/tools/sim" "$root/tools/cli_values.hpp" \
                                   -newer "$o" -name '*.[hc]pp' -print -quit)" ]; then
      smpicxx "${flags[@]}" -c "$f" -o "$o" &
      pids+=($!)
      if [ ${#pids[@]} -ge "${AGX_SIM_JOBS:-2}" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    fi
  done
done
for p in "${pids[@]}"; do wait "$p"; done
smpicxx "${objs[@]}" -o "$out/agx-sim"
echo "$out/agx-sim"
