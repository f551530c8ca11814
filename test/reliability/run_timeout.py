#!/usr/bin/env python3
"""Runs test_timeout (one rank skips a call) with AGX_TIMEOUT set and checks that the job
ends in bounded time with the right diagnosis.

  run_timeout.py --kind openmpi|mpich --mpirun PATH [--mpirun-arg ARG]... --np N
                 --timeout SECONDS --action abort|error [--preload SO] [--env K=V]...
                 --expect REGEX [--expect REGEX]... [--max-seconds S] -- PROGRAM [ARGS]

Checks:
  * the run ends within --max-seconds (it is killed otherwise: a hang is a failure);
  * every line "agx: AGX_TIMEOUT: ..." matches one of the --expect patterns (which name
    the waiting rank, the algorithm, the round or stage, the peer and the block), and
    reports a wait of at least the timeout (and not far beyond it);
  * abort: the exit status is non-zero, at least one diagnostic line was written, no
    call returned;
  * error: the exit status is 0, every --expect pattern was matched, every waiting rank
    reported MPI_ERR_OTHER for every call, and every rank used agx on a new
    communicator afterwards.
"""

import argparse
import re
import subprocess
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=["openmpi", "mpich"], required=True)
    p.add_argument("--mpirun", required=True)
    p.add_argument("--mpirun-arg", action="append", default=[])
    p.add_argument("--np", type=int, required=True)
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--action", choices=["abort", "error"], required=True)
    p.add_argument("--preload")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--expect", action="append", required=True)
    p.add_argument("--calls", type=int, default=1, help="calls per run (error mode)")
    p.add_argument("--max-seconds", type=float, default=60)
    p.add_argument("program", nargs="+")
    o = p.parse_args()

    env = {"AGX_TIMEOUT": str(o.timeout), "AGX_TIMEOUT_ACTION": o.action}
    env.update(kv.split("=", 1) for kv in o.env)
    if o.preload:
        env["LD_PRELOAD"] = o.preload
    cmd = [o.mpirun] + o.mpirun_arg + ["-n", str(o.np)]
    for key, val in env.items():  # never LD_PRELOAD on the launcher itself
        cmd += ["-x", f"{key}={val}"] if o.kind == "openmpi" else ["-genv", key, val]
    cmd += o.program
    print("+", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=o.max_seconds)
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        print(out)
        print(f"FAIL: still running after {o.max_seconds} s (a hang)")
        return 1
    elapsed = time.monotonic() - t0
    out = r.stdout
    print(out)
    print(f"exit status {r.returncode} after {elapsed:.1f} s")

    problems = []
    patterns = [re.compile(x) for x in o.expect]
    matched = [0] * len(patterns)
    diag = [l for l in out.splitlines() if "agx: AGX_TIMEOUT:" in l]
    for line in diag:
        line = line[line.index("agx: AGX_TIMEOUT:"):]
        hits = [i for i, pat in enumerate(patterns) if pat.match(line)]
        if not hits:
            problems.append(f"diagnosis matches no expected pattern: {line}")
        for i in hits:
            matched[i] += 1
        m = re.search(r"made no progress for ([0-9.]+) s", line)
        if not m:
            problems.append(f"diagnosis without the waiting time: {line}")
        elif not (o.timeout - 0.05 <= float(m.group(1)) <= o.timeout + 15):
            problems.append(f"waited {m.group(1)} s, the timeout is {o.timeout} s: {line}")
    if not diag:
        problems.append("no 'agx: AGX_TIMEOUT:' line was written")
    fails = [l for l in out.splitlines() if l.startswith("FAIL")]
    problems += fails
    if o.action == "abort":
        if r.returncode == 0:
            problems.append("exit status 0: the job was not aborted")
        if "got MPI_ERR_OTHER" in out:
            problems.append("a call returned although AGX_TIMEOUT_ACTION=abort")
    else:
        if r.returncode != 0:
            problems.append(f"exit status {r.returncode}, wanted 0")
        for i, n in enumerate(matched):
            if n == 0:
                problems.append(f"no diagnosis matched {o.expect[i]}")
        want = (o.np - 1) * o.calls
        got = out.count("got MPI_ERR_OTHER")
        if got != want:
            problems.append(f"{got} calls ended with MPI_ERR_OTHER, wanted {want}")
        works = out.count("agx works on a new communicator")
        if works != o.np:
            problems.append(f"{works} ranks used agx on a new communicator, wanted {o.np}")
    for x in problems:
        print("PROBLEM:", x)
    print("PASS" if not problems else "FAIL")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
