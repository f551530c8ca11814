#!/usr/bin/env python3
"""Docs that must match the code (run by meson test: suites unit and docs).

1. Every AGX_* environment variable the code reads has a row in docs/environment.md, and
   every row there names a variable the code reads. The variables are the string literals
   "AGX_..." of lib/core/settings.cpp, the one place that reads the environment: a
   getenv in any other C++ source of lib/, tools/ or include/ is a mismatch, and so is an
   "AGX_..." literal elsewhere (invalid_of("AGX_ALGO"), ...) that names no variable there.
2. Every algorithm of the registry's data (include/agx/algorithms.def) is named (`name`)
   in docs/algorithms.md. The rows of AGX_ALGO (docs/environment.md) and AGX_HIER_INTER
   (docs/environment.md, docs/hierarchy.md) point to the registry's table there instead
   of listing names, so that they cannot go stale: each links docs/algorithms.md and names
   no algorithm, except that an AGX_HIER_INTER row names every node path (AGX_NODE_PATH:
   the algorithms an inter-node stage cannot run) as the exception.
3. Every AGX_* variable that a script of scripts/ or tools/ reads as an input is named in
   README.md or docs/.
4. Every agx-bench option has a row in docs/benchmarks.md's options table; every agx-tune
   and agx-info option is named on the page of its tool (docs/tuning.md, docs/algorithms.md).
5. Every relative link of README.md and docs/*.md names a file of the repository, and
   its anchor (#...) a heading of that page.
6. The interposer's report lines quoted in README.md and docs/*.md (`agx summary:` rows,
   AGX_VERBOSE's "... gathered per rank: NAME") name algorithms as the interposer prints
   them: a name AGX_ALGO reads, with its radix where the algorithm takes one ("bruck:k=2",
   agx::full_name; tools/algorithms.py parse_choice reads it).

    test/docs/check_docs.py [SOURCE_ROOT]      # exit 0: all match; 1: each mismatch printed
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2]).resolve()
problems = []


def read(rel):
    return (root / rel).read_text(encoding="utf-8")


# 1. Environment variables.
SETTINGS = "lib/core/settings.cpp"
in_code = {name: SETTINGS for name in re.findall(r'"(AGX_[A-Z0-9_]+)"', read(SETTINGS))}
for top in ("lib", "tools", "include"):
    for path in sorted((root / top).rglob("*")):
        rel = str(path.relative_to(root))
        if path.suffix not in (".cpp", ".hpp", ".cu", ".c", ".h") or not path.is_file() or rel == SETTINGS:
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"\bgetenv\s*\(", text):
            problems.append(f"{rel} reads the environment (getenv); every variable is read in {SETTINGS}")
        for name in sorted(set(re.findall(r'"(AGX_[A-Z0-9_]+)"', text))):
            if name not in in_code:
                problems.append(f"{rel} names {name}, which {SETTINGS} does not read")
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

# 2. Algorithms: the first line of each entry of the registry's data,
#    AGX_PLANNER(id, "file", ...  or  AGX_NODE_PATH(id, "file", ...
registry = read("include/agx/algorithms.def")
entries = re.findall(r"^(AGX_PLANNER|AGX_NODE_PATH)\((\w+),", registry, re.M)
names = [n for _, n in entries]
node_paths = [n for kind, n in entries if kind == "AGX_NODE_PATH"]
if not names:
    problems.append("found no entry in include/agx/algorithms.def (has its format changed?)")
algo_doc = read("docs/algorithms.md")
for name in names:
    if f"`{name}`" not in algo_doc:
        problems.append(f"algorithm {name} is not named in docs/algorithms.md")
hier_doc = read("docs/hierarchy.md")
hier_rows = re.findall(r"^\| `AGX_HIER_INTER` \|.*$", hier_doc, re.M)
if not hier_rows:
    problems.append("docs/hierarchy.md has no AGX_HIER_INTER row")
option_rows = [("AGX_ALGO", "docs/environment.md", rows.get("AGX_ALGO", ""), []),
               ("AGX_HIER_INTER", "docs/environment.md", rows.get("AGX_HIER_INTER", ""), node_paths)]
option_rows += [("AGX_HIER_INTER", "docs/hierarchy.md", row, node_paths) for row in hier_rows]
for var, page, row, exceptions in option_rows:
    if "algorithms.md" not in row:
        problems.append(f"{page}: the {var} row does not point to the registry's table in docs/algorithms.md")
    for name in names:
        if name in exceptions and f"`{name}`" not in row:
            problems.append(f"{page}: the {var} row does not name {name}, which it cannot run")
        if name not in exceptions and f"`{name}`" in row:
            problems.append(f"{page}: the {var} row lists {name}; point to the table instead (a list goes stale)")

# 3. The scripts' environment variables: every AGX_* variable a script reads as an input
#    (`${AGX_X:-default}` and the like in scripts/ and tools/ scripts, os.environ in
#    Python) is named in README.md or docs/ (the page of its script), unless it is one of
#    libagx's (check 1) or set by its own script for itself (SELF_SET).
SELF_SET = {"AGX_PLOT_REEXEC": "tools/agx-plot"}  # agx-plot's guard for its one re-run
docs_text = "\n".join(p.read_text(encoding="utf-8")
                      for p in [root / "README.md"] + sorted((root / "docs").glob("*.md")))
script_vars = {}
for top in ("scripts", "tools"):
    for path in sorted((root / top).rglob("*")):
        if not path.is_file() or path.suffix in (".cpp", ".hpp", ".c", ".h", ".cu", ".md", ".csv", ".png"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        rel = str(path.relative_to(root))
        for name in re.findall(r'\$\{(AGX_[A-Z0-9_]+):?[-=?+]|environ(?:\.get)?[\[(]"(AGX_[A-Z0-9_]+)"', text):
            script_vars.setdefault(name[0] or name[1], rel)
if not script_vars:
    problems.append("no AGX_* variable read by a script (has the layout changed?)")
for name, where in sorted(script_vars.items()):
    if name in in_code:
        continue
    if name in SELF_SET:
        if where != SELF_SET[name]:
            problems.append(f"{name} is read by {where}, not only set and read by {SELF_SET[name]}: document it")
        continue
    if not re.search(rf"\b{name}\b", docs_text):
        problems.append(f"{name} (read by {where}) is named nowhere in README.md or docs/")

# 4. The tools' command-line options: every option of agx-bench (tools/bench/options.cpp)
#    has a row in the options table of docs/benchmarks.md ("### Options"), and every
#    option of agx-tune and agx-info is named on the page that describes the tool.
bench_src = read("tools/bench/options.cpp")
bench_opts = sorted(set(re.findall(r'\b(?:value|flag)\("(--[a-z-]+)"', bench_src)))
bench_doc = read("docs/benchmarks.md")
m = re.search(r"^### Options.*?$(.*?)^#", bench_doc, re.M | re.S)
bench_rows = "\n".join(l for l in (m.group(1) if m else "").splitlines() if l.startswith("|"))
if not bench_opts or not bench_rows:
    problems.append("found no agx-bench option or no options table in docs/benchmarks.md")
for opt in bench_opts:
    if not re.search(rf"`{re.escape(opt)}[ `\\]", bench_rows):
        problems.append(f"agx-bench {opt} has no row in the options table of docs/benchmarks.md")
TOOL_PAGES = {"tools/agx-tune.cpp": ["docs/tuning.md"],
              "tools/agx-info.cpp": ["docs/tuning.md", "docs/algorithms.md"]}
tool_opts = 0
for src, pages in TOOL_PAGES.items():
    text = read(src)
    opts = set(re.findall(r'add_(?:option|flag)(?:_function<[^>]*>)?\("(--[a-z-]+)"', text))
    opts |= set(re.findall(r'mode == "(--[a-z-]+)"', text))
    tool_opts += len(opts)
    page_text = "\n".join(read(p) for p in pages)
    for opt in sorted(opts):
        if not re.search(rf"{re.escape(opt)}(?![a-z-])", page_text):
            problems.append(f"{src.split('/')[-1][:-4]} {opt} is named nowhere in {' or '.join(pages)}")

# 5. Links: every relative link of README.md and docs/*.md names a file or folder of the
#    repository, and an anchor (#...) names a heading of its page (GitHub's slugs).
def slug(heading):
    text = re.sub(r"[`*]|\[([^]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page):
    seen, out = {}, set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = re.match(r"^#{1,6} (.*)$", line)
        if m and not in_code:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
links = 0
for page in pages:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue  # a web address
        links += 1
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        rel = page.relative_to(root)
        if not dest.exists():
            problems.append(f"{rel}: the link ({target}) names no file")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            problems.append(f"{rel}: the link ({target}) names no heading of {dest.relative_to(root)}")

# 6. The interposer's report lines: every algorithm with its parameters.
sys.path.insert(0, str(root / "tools"))
import algorithms  # noqa: E402  (tools/algorithms.py: the registry's data)

report_names = 0
for page in pages:
    for line in page.read_text(encoding="utf-8").splitlines():
        said = re.findall(r"agx summary: (\S+) +\d", line)
        said += re.findall(r"gathered per rank: ([\w:=?]+)", line)
        for name in said:
            if name == "passed-to-MPI":
                continue
            report_names += 1
            rel = page.relative_to(root)
            try:
                radix = algorithms.parse_choice(name, str(root / "include/agx/algorithms.def"))[1]
            except ValueError as e:
                problems.append(f"{rel}: the report line naming '{name}' is not what the interposer prints ({e})")
                continue
            if radix and ":" not in name:
                problems.append(f"{rel}: the report line naming '{name}' lacks its radix "
                                f"(the interposer prints {name}:k={radix})")

for p in problems:
    print("FAIL:", p)
print(f"check_docs: {len(in_code)} variables in the code, {len(rows)} in docs/environment.md, "
      f"{len(names)} algorithms, {len(node_paths)} node paths, {links} links, "
      f"{len(script_vars)} script variables, {len(bench_opts) + tool_opts} tool options, "
      f"{report_names} report names: "
      + ("all match" if not problems else f"{len(problems)} mismatches"))
sys.exit(1 if problems else 0)
