#!/usr/bin/env bash
# Installs agx into a scratch prefix (meson install --destdir) and imports the installed
# agx package from there, outside the build tree, on 2 ranks: it must load the installed
# libagx and gather correctly (and, where the torch backend is built, register it).
set -euo pipefail
build_dir=$1 python=$2 mpirun=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
meson install -C "$build_dir" --no-rebuild --destdir "$scratch" --quiet >/dev/null
module=$(find "$scratch" -path '*/agx/_agx.cpython-*.so' | head -1)
libagx=$(find "$scratch" -name 'libagx.so' | head -1)
[ -n "$module" ] && [ -n "$libagx" ] || { echo "installed module or libagx.so not found"; exit 1; }
echo "installed: ${module#"$scratch"} and ${libagx#"$scratch"}"
cd "$scratch"
package=$(dirname "$(dirname "$module")")
out=$(PYTHONPATH="$package" LD_LIBRARY_PATH="$(dirname "$libagx")" \
      "$mpirun" -np 2 --oversubscribe -x PYTHONPATH -x LD_LIBRARY_PATH "$python" -c '
import numpy as np, agx
from mpi4py import MPI
c = MPI.COMM_WORLD
out = agx.allgather(c, np.array([c.rank, 10 + c.rank], dtype=np.int32))
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libagx.so" in l]
if c.rank == 0: print(agx.__file__, sorted(set(libs)), list(out))')
echo "$out"
case "$out" in
  "$scratch"*"['$scratch"*"libagx.so'] [0, 10, 1, 11]") ;;
  *) echo "unexpected output"; exit 1 ;;
esac
# The torch backend, where it is built: the installed agx.torch serves an all-gather.
if [ -f "$package/agx/torch.py" ]; then
  out=$(PYTHONPATH="$package" LD_LIBRARY_PATH="$(dirname "$libagx")" \
        "$mpirun" -np 2 --oversubscribe -x PYTHONPATH -x LD_LIBRARY_PATH "$python" -c '
import torch, torch.distributed as dist, agx.torch
dist.init_process_group("agx")
out = torch.empty(4)
dist.all_gather_into_tensor(out, torch.full((2,), float(dist.get_rank())))
if dist.get_rank() == 0: print(agx.torch.__file__, out.tolist(), agx.torch.calls())
dist.destroy_process_group()')
  echo "$out"
  case "$out" in
    "$scratch"*"agx/torch.py [0.0, 0.0, 1.0, 1.0] {'all_gather_into_tensor': 1}") ;;
    *) echo "unexpected output from agx.torch"; exit 1 ;;
  esac
fi
