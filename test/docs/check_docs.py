#!/usr/bin/env python3
"""Docs that must match the code (run by meson test: suites unit and docs).

1. Every AGX_* environment variable the code reads (a string literal "AGX_..." in the C++
   sources of lib/, tools/ and include/) has a row in docs/environment.md, and every row
   there names a variable the code reads.
2. Every algorithm of the registry (lib/core/registry.cpp) is named (`name`) in
   docs/algorithms.md and in the AGX_ALGO row of docs/environment.md; every point-to-point
   algorithm of the registry (what an inter-node stage can run) is in the AGX_HIER_INTER row.

    test/docs/check_docs.py [SOURCE_ROOT]      # exit 0: all match; 1: each mismatch printed
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
problems = []


def read(rel):
    return (root / rel).read_text(encoding="utf-8")


# 1. Environment variables.
in_code = {}
for top in ("lib", "tools", "include"):
    for path in sorted((root / top).rglob("*")):
        if path.suffix in (".cpp", ".hpp", ".cu", ".c", ".h") and path.is_file():
            for name in re.findall(r'"(AGX_[A-Z0-9_]+)"', path.read_text(encoding="utf-8")):
                in_code.setdefault(name, str(path.relative_to(root)))
env_doc = read("docs/environment.md")
rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(AGX_[A-Z0-9_]+)` \|.*$", env_doc, re.M)}
if not in_code:
    problems.append("no AGX_* variable found in the sources (has the layout changed?)")
for name, where in sorted(in_code.items()):
    if name not in rows:
        problems.append(f"{name} (read in {where}) has no row in docs/environment.md")
for name in sorted(rows):
    if name not in in_code:
        problems.append(f"docs/environment.md lists {name}, which no source reads")

# 2. Algorithms: the registry's entries, {{Algorithm::id, "name", ..., point_to_point},
registry = read("lib/core/registry.cpp")
entries = re.findall(r'\{\{Algorithm::\w+,\s*"([a-z0-9_]+)",[^\n]*?,\s*(true|false)\},\s*$', registry, re.M)
names = [n for n, _ in entries]
planners = [n for n, p2p in entries if p2p == "true"]
if not names:
    problems.append("found no entry in lib/core/registry.cpp (has its format changed?)")
if not planners:
    problems.append("found no point-to-point entry in lib/core/registry.cpp")
algo_doc = read("docs/algorithms.md")
for name in names:
    if f"`{name}`" not in algo_doc:
        problems.append(f"algorithm {name} is not named in docs/algorithms.md")
    if f"`{name}`" not in rows.get("AGX_ALGO", ""):
        problems.append(f"algorithm {name} is missing from AGX_ALGO's list in docs/environment.md")
for name in planners:
    if f"`{name}`" not in rows.get("AGX_HIER_INTER", ""):
        problems.append(f"planner {name} is missing from AGX_HIER_INTER's list in docs/environment.md")

for p in problems:
    print("FAIL:", p)
print(f"check_docs: {len(in_code)} variables in the code, {len(rows)} in docs/environment.md, "
      f"{len(names)} algorithms, {len(planners)} planners: "
      + ("all match" if not problems else f"{len(problems)} mismatches"))
sys.exit(1 if problems else 0)
