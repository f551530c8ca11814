#!/usr/bin/env python3
"""Launches an unmodified MPI program under LD_PRELOAD=libagx_pmpi.so at several
rank counts and checks what the interposer printed.

  run_pmpi.py --kind openmpi|mpich --mpirun PATH [--mpirun-arg ARG]... --preload SO[:SO...]
              --np 1,2,3 [--algo NAME] [--env K=V]... [--expect-summary]
              [--expect-verbose] [--expect-warnings N] [--expect-mpi] -- PROGRAM [ARGS]

Open MPI gets the variables with `-x K=V`, MPICH with `-genv K V`; LD_PRELOAD is
never set for the launcher itself. Exit 0 when every run passed, 77 (skip) when the
program is missing."""

import argparse
import os
import re
import subprocess
import sys
import time



def launch_command(opts, np, env):
    cmd = [opts.mpirun] + opts.mpirun_arg + ["-n", str(np)]
    for key, val in env.items():
        cmd += ["-x", f"{key}={val}"] if opts.kind == "openmpi" else ["-genv", key, val]
    return cmd + opts.program


def check_output(opts, np, out):
    """Problems in the interposer's output of one run, as a list of strings."""
    problems = []
    if opts.expect_summary:
        rows = dict(re.findall(r"^agx summary: (\S+)\s+(\d+)", out, re.M))
        rows.pop("algorithm", None)
        passed = int(rows.pop("passed-to-MPI", "-1"))
        if passed < 0:
            problems.append("no AGX_SUMMARY table at MPI_Finalize")
        if opts.expect_mpi:
            if rows:
                problems.append(f"AGX_DISABLE set but agx ran calls: {rows}")
        else:
            if not rows:
                problems.append("the summary shows no call through agx")
            # A forced algorithm (any but auto; rows name the algorithm, not its radix).
            forced = opts.algo.split(":")[0]
            if forced != "auto" and set(rows) != {forced}:
                problems.append(f"AGX_ALGO={opts.algo} but the summary shows {sorted(rows)}")
            if opts.max_passed is not None and passed > opts.max_passed:
                problems.append(f"{passed} calls passed to MPI, at most {opts.max_passed} expected")
    if opts.expect_verbose and not re.search(r"^agx: MPI_Allgather on MPI_COMM_WORLD \(%d ranks?\), .*: \w+$" % np, out, re.M):
        problems.append("no AGX_VERBOSE line for MPI_Allgather on MPI_COMM_WORLD")
    if opts.expect_warnings is not None:
        n = len(re.findall(r"^agx: warning:", out, re.M))
        if n != opts.expect_warnings:
            problems.append(f"{n} warnings printed, expected {opts.expect_warnings}")
    return problems


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=["openmpi", "mpich"], required=True)
    p.add_argument("--mpirun", required=True)
    p.add_argument("--mpirun-arg", action="append", default=[])
    p.add_argument("--preload", required=True)
    p.add_argument("--np", required=True)
    p.add_argument("--algo", default="auto")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--expect-summary", action="store_true")
    p.add_argument("--expect-verbose", action="store_true")
    p.add_argument("--expect-warnings", type=int)
    p.add_argument("--expect-mpi", action="store_true", help="every call passes to MPI")
    p.add_argument("--max-passed", type=int)
    p.add_argument("--timeout", type=float, default=90)
    p.add_argument("program", nargs=argparse.REMAINDER)
    opts = p.parse_args()
    if opts.program and opts.program[0] == "--":
        opts.program = opts.program[1:]
    if not opts.program or not os.path.exists(opts.program[0]):
        print(f"SKIP: program {opts.program[:1]} not built")
        return 77

    env = {"LD_PRELOAD": opts.preload, "AGX_ALGO": opts.algo}
    if opts.expect_summary:
        env["AGX_SUMMARY"] = "1"
    if opts.expect_mpi:
        env["AGX_TEST_EXPECT"] = "mpi"
    for kv in opts.env:
        key, _, val = kv.partition("=")
        env[key] = val
    # The launcher itself runs without the interposer and without stray AGX_ settings.
    launcher_env = {k: v for k, v in os.environ.items()
                    if k != "LD_PRELOAD" and not k.startswith("AGX_")}

    failed = 0
    for np in [int(x) for x in opts.np.split(",") if x]:
        cmd = launch_command(opts, np, env)
        start = time.monotonic()
        try:
            run = subprocess.run(cmd, env=launcher_env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=opts.timeout)
            out, rc = run.stdout, run.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
            rc = "timeout"
        problems = ([] if rc == 0 else [f"exit status {rc}"]) + check_output(opts, np, out)
        status = "ok" if not problems else "FAIL: " + "; ".join(problems)
        print(f"np={np} AGX_ALGO={opts.algo} ({time.monotonic() - start:.1f} s): {status}")
        if problems:
            failed += 1
            print("  command: " + " ".join(cmd))
            print("  " + out.replace("\n", "\n  "))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
