#!/usr/bin/python3
"""Runs a command and prints one JSON line: its wall time and the peak memory of its whole process
tree (the command and every process it starts), sampled every 0.2 s:

    measure.py [--label NAME] -- COMMAND [ARGS...]

peak_tree_mib sums each process's proportional set size (Pss from /proc/PID/smaps_rollup: pages
shared by several processes, such as the libraries of forked workers, are split among them, so the
sum is what the tree holds); peak_process_mib is the largest single process's resident size
(getrusage's ru_maxrss of the command and of its waited-for children, the figure `/usr/bin/time
-v` prints). Linux only.
"""
import json
import os
import resource
import subprocess
import sys
import time


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children(p))
    return out


def pss_kib(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    args = sys.argv[1:]
    label = None
    if args[:1] == ["--label"]:
        label, args = args[1], args[2:]
    if args[:1] != ["--"] or len(args) < 2:
        sys.exit(__doc__)
    start = time.monotonic()
    proc = subprocess.Popen(args[1:])
    peak = 0
    while proc.poll() is None:
        peak = max(peak, sum(pss_kib(p) for p in tree(proc.pid)))
        time.sleep(0.2)
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {"label": label, "rc": proc.returncode, "wall_s": round(wall, 1),
              "peak_tree_mib": round(peak / 1024), "peak_process_mib": round(usage.ru_maxrss / 1024)}
    print(json.dumps(result), flush=True)
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
