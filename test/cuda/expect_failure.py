#!/usr/bin/env python3
"""Runs a command that must fail in one known way (a broken seam that the check must
catch): passes only when it exits with --rc (not a signal, not a failed launch) and its
output matches every --text regular expression. Anything else fails, with the reason.

  expect_failure.py --rc 1 --text 'bad bytes' [--text ...] -- COMMAND [ARGS]"""

import argparse
import re
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rc", type=int, required=True)
    p.add_argument("--text", action="append", default=[])
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    problems = []
    if r.returncode != a.rc:
        problems.append(f"exit status {r.returncode}, expected {a.rc}")
    for t in a.text:
        if not re.search(t, r.stdout, re.M):
            problems.append(f"no output matches '{t}'")
    if problems:
        print(r.stdout[-4000:])
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"failed as expected (exit {r.returncode}; matched {a.text})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
