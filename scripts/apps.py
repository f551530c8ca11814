#!/usr/bin/env python3
"""Real applications natively and under agx's interposer, alternating (docs/results.md,
"Real applications"). Installs Debian 12's own MPI builds of the applications (apt-get,
needs root or sudo), builds the interposer where it is missing, then for each
application and rank count runs the same small input natively and with libagx_pmpi.so
preloaded, one after the other, --runs times, and prints per case:

  native and agx wall seconds (median, min-max), agx/native, whether the answers are
  identical, and what agx served (AGX_SUMMARY: all-gather calls by algorithm, calls
  passed to the MPI library, MPI_Alloc_mem calls served from agx's memory).

Applications (Open MPI builds):
  nwchem  NWChem 7.0.2: water, B3LYP/6-31G* energy. Its Global Arrays (ARMCI over MPI)
          call MPI_Alloc_mem for about 40 MiB some 99 times per rank; a few all-gathers.
          Answer: the "Total DFT energy" line.
  lammps  LAMMPS (29 Sep 2021): the nudged elastic band example hop1 of lammps-examples,
          one replica per rank, run for its full 2000 + 2000 steps (force tolerance 0);
          MPI_Allgather(v) between replicas every step. Answer: the last line of the
          NEB table (every replica's coordinate and energy).

  scripts/apps.py [--apps nwchem,lammps] [--np 2,4] [--runs 5] [--build DIR]
                  [--csv FILE] [--no-install]

Answers are compared as printed (the same digits): agx moves bytes, so an application's
arithmetic sees the same inputs in the same order. Exit status 1 when an answer differs
or a run fails."""

import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = {"nwchem": ["nwchem-openmpi"], "lammps": ["lammps", "lammps-examples"]}

NWCHEM_INPUT = """start water
title "water B3LYP/6-31G*"
memory total 400 mb
geometry units angstrom
  O   0.000000   0.000000   0.117790
  H   0.000000   0.755453  -0.471161
  H   0.000000  -0.755453  -0.471161
end
basis
  * library 6-31G*
end
dft
  xc b3lyp
end
task dft energy
"""
NEB = "/usr/share/doc/lammps-examples/examples/neb"


def install(apps):
    missing = [p for a in apps for p in PACKAGES[a]
               if subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
                                 text=True).stdout.find("install ok installed") < 0]
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    print("apps: installing " + " ".join(missing), flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(sudo + ["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing,
                   check=True, env=env, stdout=subprocess.DEVNULL)


def prepare(app, np, work):
    """The command line and the function that reads the answer from its output."""
    if app == "nwchem":
        path = os.path.join(work, "water.nw")
        with open(path, "w") as f:
            f.write(NWCHEM_INPUT)
        answer = lambda out: " ".join(re.findall(r"Total DFT energy =\s*(\S+)", out)) or None
        return ["nwchem.openmpi", path], answer
    for name in os.listdir(NEB):
        shutil.copy(os.path.join(NEB, name), work)
    with open(os.path.join(NEB, "in.neb.hop1")) as f:
        text = f.read()
    # every step of both stages: no force tolerance to stop at
    text, n = re.subn(r"^neb\s+0\.0\s+\S+\s+\d+\s+\d+\s+(\d+)", r"neb 0.0 0.0 2000 2000 \1", text, flags=re.M)
    if n != 1:
        sys.exit("apps: lammps-examples' in.neb.hop1 has no 'neb' line of the known form")
    with open(os.path.join(work, "in.neb.apps"), "w") as f:
        f.write(text)

    def answer(out):
        rows = [l for l in out.splitlines() if re.match(r"^\d+\s+[-0-9.e]+\s", l)]
        return rows[-1].strip() if rows else None
    return ["lmp", "-partition", f"{np}x1", "-in", "in.neb.apps", "-log", "none"], answer


def run(cmd, np, work, preload):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1")
    launch = ["mpirun.openmpi", "--oversubscribe", "-np", str(np)]
    if preload:
        launch += ["-x", "LD_PRELOAD=" + preload, "-x", "AGX_SUMMARY=1"]
    t0 = time.monotonic()
    p = subprocess.run(launch + cmd, cwd=work, env=env, capture_output=True, text=True)
    return time.monotonic() - t0, p.returncode, p.stdout + p.stderr


def served(out):
    """AGX_SUMMARY's rows in a few words."""
    rows = re.findall(r"^agx summary: (\S+)\s+(\d+)", out, re.M)  # (rows such as bruck:k=2)
    calls = ", ".join(f"{name} {n}" for name, n in rows if name != "passed")
    passed = re.search(r"^agx summary: passed-to-MPI\s+(\d+)", out, re.M)
    alloc = re.search(r"MPI_Alloc_mem served by agx in (\d+) calls \(([\d.]+) MiB\), by the MPI library in (\d+)", out)
    text = f"all-gathers: {calls or 'none'}; passed {passed.group(1) if passed else '?'}"
    if alloc:
        text += f"; MPI_Alloc_mem: {alloc.group(1)} by agx ({alloc.group(2)} MiB), {alloc.group(3)} by MPI"
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apps", default="nwchem,lammps")
    ap.add_argument("--np", default="2,4")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--csv", default=None)
    ap.add_argument("--no-install", action="store_true")
    o = ap.parse_args()
    apps = o.apps.split(",")
    for a in apps:
        if a not in PACKAGES:
            sys.exit(f"apps: unknown application '{a}' (nwchem, lammps)")
    if not o.no_install:
        install(apps)
    preload = os.path.join(o.build, "lib", "pmpi", "libagx_pmpi.so")
    if not os.path.exists(preload):
        subprocess.run([os.path.join(ROOT, "scripts", "setup.sh")], check=True)
        if not os.path.exists(os.path.join(o.build, "build.ninja")):
            subprocess.run(["meson", "setup", o.build], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        subprocess.run(["ninja", "-C", o.build, "lib/pmpi/libagx_pmpi.so"], check=True, stdout=subprocess.DEVNULL)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"apps: {cpu}, {os.cpu_count()} cores, commit {commit}, {o.runs} alternating runs each")
    rows, bad = [], False
    for app in apps:
        for np in [int(n) for n in o.np.split(",")]:
            with tempfile.TemporaryDirectory(prefix=f"agx-{app}-") as work:
                cmd, answer = prepare(app, np, work)
                times = {"native": [], "agx": []}
                answers = {"native": set(), "agx": set()}
                last = ""
                for k in range(o.runs):
                    for way in (("native", "agx") if k % 2 == 0 else ("agx", "native")):
                        seconds, rc, out = run(cmd, np, work, preload if way == "agx" else None)
                        a = answer(out)
                        if rc != 0 or a is None:
                            print(f"apps: {app} N={np} {way} run {k + 1} failed (exit {rc}):\n{out[-3000:]}")
                            bad = True
                            continue
                        times[way].append(seconds)
                        answers[way].add(a)
                        if way == "agx":
                            last = out
            if not times["native"] or not times["agx"]:
                continue
            same = len(answers["native"] | answers["agx"]) == 1
            bad = bad or not same
            med = {w: statistics.median(t) for w, t in times.items()}
            row = {"app": app, "ranks": np, "runs": o.runs,
                   "native_s": round(med["native"], 3), "native_min": round(min(times["native"]), 3),
                   "native_max": round(max(times["native"]), 3), "agx_s": round(med["agx"], 3),
                   "agx_min": round(min(times["agx"]), 3), "agx_max": round(max(times["agx"]), 3),
                   "ratio": round(med["agx"] / med["native"], 3), "answers": "identical" if same else "DIFFER",
                   "served": served(last), "commit": commit}
            rows.append(row)
            print(f"{app:7} N={np}  native {row['native_s']:.2f} s ({row['native_min']:.2f}-{row['native_max']:.2f})"
                  f"  agx {row['agx_s']:.2f} s ({row['agx_min']:.2f}-{row['agx_max']:.2f})"
                  f"  agx/native {row['ratio']:.2f}  answers {row['answers']}", flush=True)
            print(f"{'':7} {row['served']}", flush=True)
            if not same:
                print(f"{'':7} native: {sorted(answers['native'])}\n{'':7} agx:    {sorted(answers['agx'])}")
    if o.csv and rows:
        with open(o.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
