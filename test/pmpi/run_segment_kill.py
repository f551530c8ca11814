#!/usr/bin/env python3
"""No shared segment of agx outlives its job, whatever process dies when (issue 16,
item 5). Runs segment_c (all-gathers that grow the node's segment, AGX_ALGO=
shared_memory, under LD_PRELOAD=libagx_pmpi.so) once per kill point, each run with one
process killed by SIGKILL:

  * by the program, just before a call that grows the segment, while the other ranks
    are inside it (local rank 0, the creator, or another rank);
  * by agx's test seam AGX_TEST_KILL_SEGMENT=<local>:<point>:<n> at each point of the
    n-th segment's creation: created (local rank 0 has made it, nobody has mapped it),
    mapped (this rank has mapped it, the node has not agreed), agreed (all mapped).

After each run (which must fail: a rank died) nothing named after the job's processes
may be left in /dev/shm (agx-<pid>-*), and a clean run must pass.

  run_segment_kill.py --kind openmpi|mpich --mpirun PATH [--mpirun-arg A]... --preload SO
                      --np N -- PROGRAM
"""

import argparse
import os
import re
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=["openmpi", "mpich"], required=True)
    p.add_argument("--mpirun", required=True)
    p.add_argument("--mpirun-arg", action="append", default=[])
    p.add_argument("--preload", required=True)
    p.add_argument("--np", type=int, default=3)
    p.add_argument("program", nargs=argparse.REMAINDER)
    o = p.parse_args()
    prog = o.program[1:] if o.program and o.program[0] == "--" else o.program
    if not os.path.isdir("/dev/shm"):
        print("SKIP: no /dev/shm")
        return 77
    launcher_env = {k: v for k, v in os.environ.items()
                    if k != "LD_PRELOAD" and not k.startswith("AGX_")}

    def run(env, args):
        cmd = [o.mpirun] + o.mpirun_arg + ["-n", str(o.np)]
        for k, v in env.items():
            cmd += ["-x", f"{k}={v}"] if o.kind == "openmpi" else ["-genv", k, v]
        cmd += prog + args
        try:
            r = subprocess.run(cmd, env=launcher_env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=120)
            return r.returncode, r.stdout, cmd
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            return "timeout", out, cmd

    base = {"LD_PRELOAD": o.preload, "AGX_ALGO": "shared_memory"}
    cases = [("clean", {}, [], True)]
    for rank in (0, 1):
        for call in (2, 3):
            cases.append((f"rank {rank} killed before growing call {call}", {},
                          ["--die", str(rank), str(call)], False))
    for local in (0, 1):
        for point in ("created", "mapped", "agreed"):
            for n in (1, 3):  # the flag segment, the second data segment
                cases.append((f"local rank {local} killed at '{point}' of segment {n}",
                              {"AGX_TEST_KILL_SEGMENT": f"{local}:{point}:{n}"}, [], False))
    failed = 0
    for name, env, args, clean in cases:
        rc, out, cmd = run({**base, **env}, args)
        pids = [int(m) for m in re.findall(r"^pid \d+ (\d+)$", out, re.M)]
        left = sorted(f for f in os.listdir("/dev/shm")
                      if any(f.startswith(f"agx-{pid}-") for pid in pids))
        problems = []
        if len(pids) != o.np:
            problems.append(f"{len(pids)} of {o.np} processes printed their pid")
        if rc == "timeout":
            problems.append("the job hung")
        elif clean and rc != 0:
            problems.append(f"exit status {rc}")
        elif not clean and rc == 0:
            problems.append("the job succeeded although a rank was killed")
        if left:
            problems.append("left in /dev/shm: " + ", ".join(left))
            for f in left:  # do not leave them to the next run
                try:
                    os.unlink(os.path.join("/dev/shm", f))
                except OSError:
                    pass
        print(f"{name}: {'ok' if not problems else 'FAIL: ' + '; '.join(problems)}")
        if problems:
            failed += 1
            print("  command: " + " ".join(cmd))
            print("  " + out[-3000:].replace("\n", "\n  "))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
