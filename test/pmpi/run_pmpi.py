#!/usr/bin/env python3
"""Launches an unmodified MPI program under LD_PRELOAD=libagx_pmpi.so at several
rank counts and checks what the interposer printed.

  run_pmpi.py --kind openmpi|mpich --mpirun PATH [--mpirun-arg ARG]... --preload SO[:SO...]
              --np 1,2,3 [--algo NAME[:k=K]] [--env K=V]... [--expect-summary]
              [--expect-verbose] [--expect-warnings N] [--expect-mpi] [--max-passed N]
              [--calls-per-rank N] [--radix-takes-effect] -- PROGRAM [ARGS]

Open MPI gets the variables with `-x K=V`, MPICH with `-genv K V`; LD_PRELOAD is
never set for the launcher itself. --algo must parse as AGX_ALGO does (the registry's
data, tools/algorithms.py) unless the run expects warnings (an invalid AGX_ALGO is what
those runs test): a name the check cannot read fails instead of turning the check off.
The algorithms the summary and the verbose lines name must parse too, state their radix
where they take one (the interposer names every algorithm with its parameters,
"bruck:k=2"), and match --algo: the name and the radix. --radix-takes-effect: one of
the rank counts must be one where the radix of --algo changes the schedule (bruck:
k < N; locality_bruck: k < N and k divides N). --calls-per-rank N (with --expect-summary):
agx served exactly N calls on each rank (the summary's calls add up to N times the ranks),
for a program that cannot count them itself. Exit 0 when every run passed, 77 (skip) when
the program is missing."""

import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools"))
import algorithms  # noqa: E402  (tools/algorithms.py: the registry's data)


def radix_takes_effect(choice, np):
    """Whether the radix of `choice` changes its schedule on `np` ranks."""
    name, k = choice
    if k == 0 or k >= np:  # k >= N: one round whatever k
        return False
    return name != "locality_bruck" or np % k == 0


def matches(want, reported):
    """Problems with one algorithm the interposer reported, against --algo's choice."""
    try:
        got = algorithms.parse_choice(reported)
    except ValueError as e:
        return [f"the interposer reported '{reported}', which does not parse: {e}"]
    if got[1] != 0 and ":" not in reported:
        return [f"the interposer reported '{reported}' without its radix"]
    if got[0] == "auto":
        return ["the interposer reported 'auto', which is not an algorithm that ran"]
    if want is None or want[0] == "auto":  # (None: an invalid AGX_ALGO, warned of)
        return []
    if got != want:
        return [f"AGX_ALGO names {want[0]}" + (f" with k={want[1]}" if want[1] else "") +
                f" but the interposer reported '{reported}'"]
    return []


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
            for row in sorted(rows):  # a forced algorithm: every row is it
                problems += matches(opts.choice, row)
            if opts.max_passed is not None and passed > opts.max_passed:
                problems.append(f"{passed} calls passed to MPI, at most {opts.max_passed} expected")
            served = sum(int(c) for c in rows.values())
            if opts.calls_per_rank is not None and served != opts.calls_per_rank * np:
                problems.append(f"agx served {served} calls, expected {opts.calls_per_rank} on "
                                f"each of {np} ranks")
    if opts.expect_verbose:
        # Every line that names an algorithm, of any call on any communicator; at least
        # one of them on MPI_COMM_WORLD.
        said = re.findall(r"^agx: (MPI_\w+) on (.*) \(\d+ ranks?\), .* gathered per rank: (\S+)$",
                          out, re.M)
        if not any(comm == "MPI_COMM_WORLD" for _, comm, _ in said):
            problems.append("no AGX_VERBOSE line naming an algorithm on MPI_COMM_WORLD")
        for function, comm, name in said:
            problems += [f"{function} on {comm}: {p}" for p in matches(opts.choice, name)]
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
    p.add_argument("--calls-per-rank", type=int)
    p.add_argument("--radix-takes-effect", action="store_true")
    p.add_argument("--timeout", type=float, default=90)
    p.add_argument("program", nargs=argparse.REMAINDER)
    opts = p.parse_args()
    if opts.program and opts.program[0] == "--":
        opts.program = opts.program[1:]
    if not opts.program or not os.path.exists(opts.program[0]):
        print(f"SKIP: program {opts.program[:1]} not built")
        return 77
    try:
        opts.choice = algorithms.parse_choice(opts.algo)
    except ValueError as e:
        if opts.expect_warnings is None:  # only the runs that test a bad AGX_ALGO pass one
            print(f"FAIL: --algo {opts.algo}: {e}")
            return 1
        opts.choice = None
    if opts.calls_per_rank is not None and not opts.expect_summary:
        print("FAIL: --calls-per-rank reads the summary: it needs --expect-summary")
        return 1
    ranks = [int(x) for x in opts.np.split(",") if x]
    if opts.radix_takes_effect and not (opts.choice and any(radix_takes_effect(opts.choice, n) for n in ranks)):
        print(f"FAIL: --radix-takes-effect: the radix of {opts.algo} changes nothing at {opts.np} ranks")
        return 1

    env = {"LD_PRELOAD": opts.preload, "AGX_ALGO": opts.algo}
    if opts.expect_summary:
        env["AGX_SUMMARY"] = "1"
    if opts.expect_mpi:
        env["AGX_TEST_EXPECT"] = "mpi"
    if opts.choice is None:  # the program's counter check: no call runs this name
        env["AGX_TEST_ALGO_INVALID"] = "1"
    for kv in opts.env:
        key, _, val = kv.partition("=")
        env[key] = val
    # The launcher itself runs without the interposer and without stray AGX_ settings.
    launcher_env = {k: v for k, v in os.environ.items()
                    if k != "LD_PRELOAD" and not k.startswith("AGX_")}

    failed = 0
    for np in ranks:
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
