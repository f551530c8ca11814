#!/usr/bin/env python3
"""The layers of lib/ (docs/algorithms.md, "Layering"), checked on every #include "x/...".

A folder may include its own headers and those of folders in lower layers only:

  0  core                         schedules, the planners (core/planners/), the registry,
                                  round engine, selector
  1  hier                         shared segments and their copies, topology
  2  cuda                         device paths
  3  api                          set-up of a communicator and the dispatch among paths
  4  codec fused pmpi             built on the entry points

Every planner file of the registry's data (include/agx/algorithms.def) must lie in
lib/core/planners/: lib/core's registry points to each, so a planner elsewhere would be
a reference out of lib/core.

    test/unit/check_layering.py [SOURCE_ROOT]   # exit 0: clean; 1: each violation printed

(At link level, lib/core is checked by the test 'core-links-alone': test/unit/meson.build.)
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
layers = [["core"], ["hier"], ["cuda"], ["api"], ["codec", "fused", "pmpi"]]
layer_of = {name: i for i, names in enumerate(layers) for name in names}
top = len(layers) - 1

problems = []
folders = sorted(p for p in (root / "lib").iterdir() if p.is_dir())
for folder in folders:
    if folder.name not in layer_of:
        problems.append(f"lib/{folder.name}: no layer (add it to test/unit/check_layering.py)")
        continue
    mine = layer_of[folder.name]
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".cpp", ".hpp", ".cu", ".h", ".c") or not path.is_file():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"([a-z_]+)/', line)
            if not m or m.group(1) == folder.name or m.group(1) not in layer_of:
                continue
            other = layer_of[m.group(1)]
            if other < mine or (other == mine == top):
                continue
            problems.append(f"{path.relative_to(root)}:{n}: lib/{folder.name} (layer {mine}) "
                            f"includes {m.group(1)}/ (layer {other}): {line.strip()}")
for line in (root / "include/agx/algorithms.def").read_text(encoding="utf-8").splitlines():
    m = re.match(r'AGX_(?:PLANNER|NODE_PATH)\(([a-z0-9_]+), *"([^"]+)"', line)
    if m and not m.group(2).startswith("lib/core/planners/"):
        problems.append(f"include/agx/algorithms.def: {m.group(1)}'s planner {m.group(2)} is not in "
                        "lib/core/planners/ (lib/core's registry would reference out of lib/core)")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
