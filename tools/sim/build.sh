#!/usr/bin/env bash
# Builds agx-sim, agx's executor and planners against SimGrid SMPI (smpicxx), from the
# same sources as libagx: lib/core's schedule, planner, registry, message, executor (with
# its timeout and integrity checks and CRC32C), validator, cost model, config, tuning and
# selector (select.cpp), the planner file of each AGX_PLANNER entry of the registry's data
# (include/agx/algorithms.def, as meson.build reads it), lib/core/planners/node_planner.cpp (the
# shared_memory and hierarchical planners), plus tools/sim (driver, the simulator's node
# model, its progress model and the fair baselines), and lib/core's communicator context
# and descriptor cache (the executor asks them for compiled messages; the simulator's
# communicators have no context, so every simulated call plans its own). lib/hier
# (shared memory, hwloc), lib/pmpi and lib/api are not compiled: lib/core needs nothing of
# them (the test 'core-links-alone'). The lib/core files left out (nonblocking and
# persistent operations, the consistency checks) serve only code the simulator never
# calls, which the linker drops (-ffunction-sections, --gc-sections).
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
mapfile -t planners < <(sed -n 's/^AGX_PLANNER([a-z0-9_]*, *"\([^"]*\)".*/\1/p' "$root/include/agx/algorithms.def")
sources=(lib/core/schedule.cpp lib/core/planner.cpp lib/core/registry.cpp lib/core/message.cpp lib/core/executor.cpp
         lib/core/descriptors.cpp lib/core/comm_context.cpp lib/core/algorithm_trials.cpp
         lib/core/timeout.cpp lib/core/integrity.cpp lib/core/crc32c.cpp
         lib/core/validator.cpp lib/core/cost_model.cpp lib/core/settings.cpp
         lib/core/tuning.cpp lib/core/select.cpp lib/core/choose.cpp
         "${planners[@]}" lib/core/planners/node_planner.cpp
         tools/sim/baselines.cpp tools/sim/routes.cpp tools/sim/sim_node.cpp tools/sim/progress.cpp tools/sim/driver.cpp)
flags=(-std=c++20 -O2 -Wall -Wextra -ffunction-sections -fdata-sections -DAGX_DYNAMIC_TLS
       -I"$root/include" -I"$root/lib" -I"$root/tools" -I"$root/tools/sim")
objs=()
pids=()
for s in "${sources[@]}"; do
  for f in "$root"/$s; do
    o="$out/obj/$(echo "${f#"$root"/}" | tr / _).o"
    objs+=("$o")
    # Rebuild only what changed (sources or the headers they may include).
    if [ ! -f "$o" ] || [ -n "$(find "$f" "$root/lib/core" "$root/lib/hier" "$root/include/agx" "$root/tools/sim" "$root/tools/cli_values.hpp" \
                                   -newer "$o" \( -name '*.[hc]pp' -o -name '*.def' \) -print -quit)" ]; then
      extra=()
      # select.cpp's communicator entry points stay local to agx-sim (hidden), so that the
      # linker can drop them (agx-sim is a shared object that smpirun loads).
      [ "$s" = lib/core/select.cpp ] && extra=(-fvisibility=hidden)
      smpicxx "${flags[@]}" "${extra[@]}" -c "$f" -o "$o" &
      pids+=($!)
      if [ ${#pids[@]} -ge "${AGX_SIM_JOBS:-2}" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    fi
  done
done
for p in "${pids[@]}"; do wait "$p"; done
# Not one agx symbol may be left undefined (smpicxx links with -z defs; this says which).
smpicxx "${objs[@]}" -Wl,--gc-sections -Wl,-Bsymbolic-functions -o "$out/agx-sim"
if nm -C -u "$out/agx-sim" | grep -q 'agx::'; then
  echo "tools/sim/build.sh: agx-sim needs symbols the simulator does not build:" >&2
  nm -C -u "$out/agx-sim" | grep 'agx::' >&2
  rm -f "$out/agx-sim"
  exit 1
fi
echo "$out/agx-sim"
