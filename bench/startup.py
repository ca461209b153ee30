#!/usr/bin/env python3
"""Start-up time of leanseq programs: each PROGRAM runs `--version` (which loads LibTorch and
checks the BLAS like every command), the programs alternated over --runs rounds, plus the first
program once more per round with every setting leanseq makes already in its environment (the
floor: no restart, kernels chosen when OpenBLAS loads). Prints one JSON object."""
import argparse
import json
import os
import statistics
import subprocess
import time

SETTINGS = {"OPENBLAS_THREAD_TIMEOUT": "4", "GOMP_SPINCOUNT": "10000", "LEANSEQ_SET_OPENBLAS_CORETYPE": "1"}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("programs", nargs="+", help="leanseq executables to compare (the first also gives the floor)")
    p.add_argument("--runs", type=int, default=12)
    p.add_argument("--coretype", default="SKYLAKEX", help="OPENBLAS_CORETYPE of the floor run")
    a = p.parse_args()
    for prog in a.programs:
        if not os.access(prog, os.X_OK):
            p.error(f"{prog}: not an executable file")
    floor_env = dict(os.environ, OPENBLAS_CORETYPE=a.coretype, **SETTINGS)
    contenders = [(prog, prog, None) for prog in a.programs] + [("floor", a.programs[0], floor_env)]
    seconds = {name: [] for name, _, _ in contenders}
    for _ in range(a.runs):
        for name, prog, env in contenders:
            t = time.perf_counter()
            subprocess.run([prog, "--version"], env=env, capture_output=True, check=True)
            seconds[name].append(time.perf_counter() - t)
    out = {"runs": a.runs, "command": "--version", "contenders": [
        {"name": name, "median_seconds": statistics.median(v), "min_seconds": min(v), "max_seconds": max(v),
         "seconds": v} for name, v in seconds.items()]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
