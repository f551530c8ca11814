#!/usr/bin/env python3
"""The algorithm lists of the registry's data, include/agx/algorithms.def, read as the
top-level meson.build reads it: the first line of each entry,
`AGX_PLANNER(id, "file", default radix, (radices),` or `AGX_NODE_PATH(...)`. The scripts
that run one thing per algorithm (tools/sim/run-grid.py, test/sim/run-sim-test.sh) take
their lists from here, so that a new registry line reaches them by itself.

    tools/algorithms.py planners        # every AGX_PLANNER id, registry order
    tools/algorithms.py variants        # planners at each radix they list ('bruck:k=4';
                                        # the default radix is the plain name)
    tools/algorithms.py node-paths      # every AGX_NODE_PATH id
    tools/algorithms.py ... --sep ,     # one line, comma-separated (default: one a line)
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEF = os.path.join(ROOT, "include", "agx", "algorithms.def")
_FIRST_LINE = re.compile(r'^(AGX_PLANNER|AGX_NODE_PATH)\((\w+),\s*"[^"]*",\s*(\d+),\s*\(([^)]*)\),')


def entries(path=DEF):
    """[(kind, id, default radix, [radices])] in registry order."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith(("AGX_PLANNER(", "AGX_NODE_PATH(")):
                continue
            m = _FIRST_LINE.match(line)
            if not m:
                raise SystemExit(f"{path}: an entry's first line needs id, \"file\", default radix, (radices): {line.strip()}")
            radices = [int(k) for k in m.group(4).replace(" ", "").split(",") if k]
            out.append((m.group(1), m.group(2), int(m.group(3)), radices))
    if not out:
        raise SystemExit(f"{path}: no AGX_PLANNER or AGX_NODE_PATH entry (has the format changed?)")
    return out


def planners(path=DEF):
    return [name for kind, name, _, _ in entries(path) if kind == "AGX_PLANNER"]


def node_paths(path=DEF):
    return [name for kind, name, _, _ in entries(path) if kind == "AGX_NODE_PATH"]


def variants(path=DEF, kinds=("AGX_PLANNER",)):
    """Each algorithm at every radix it lists, as AGX_ALGO writes it (meson.build's
    agx_algorithm_variants, restricted to `kinds`)."""
    out = []
    for kind, name, default, radices in entries(path):
        if kind in kinds:
            out += [name if k == default else f"{name}:k={k}" for k in radices] or [name]
    return out


def parse_choice(text, path=DEF):
    """(name, radix) of AGX_ALGO's syntax, "name" or "name:k=K", with the default radix
    filled in (0 for algorithms without one; "auto" is (auto, 0)), as
    agx::parse_algorithm_choice reads it. Raises ValueError with the reason when the text
    does not parse."""
    name, colon, rest = text.partition(":")
    known = {n: default for _, n, default, _ in entries(path)}
    known["auto"] = 0
    if name not in known:
        raise ValueError(f"'{name}' names no algorithm (known: {', '.join(sorted(known))})")
    radix = known[name]
    if not colon:
        return name, radix
    if radix == 0:
        raise ValueError(f"algorithm '{name}' takes no parameters")
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        if not eq or key != "k":
            raise ValueError(f"'{item}' is not k=K (the parameter of '{name}')")
        if not value.isdigit() or int(value) < 2:
            raise ValueError(f"k='{value}' for '{name}': the radix must be a whole number, 2 or more")
        radix = int(value)
    return name, radix


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("list", choices=["planners", "variants", "node-paths"])
    p.add_argument("--sep", default="\n")
    opts = p.parse_args()
    names = {"planners": planners, "variants": variants, "node-paths": node_paths}[opts.list]()
    sys.stdout.write(opts.sep.join(names) + "\n")


if __name__ == "__main__":
    main()
