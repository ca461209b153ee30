#!/usr/bin/env python3
"""Translator(inter_threads=N) against inter_threads=1 on one model: sentences/s when single-sentence
requests arrive together (translate_async, batch 1), in alternated rounds, medians; and the
process's resident memory after loading and translating, for each setting in a fresh process
(weights: one copy whatever N is). Prints JSON.

usage: PYTHONPATH=build/python bench/python_inter_threads.py CHECKPOINT INPUT [--inter 2] [--rounds 5]
       [--sentences 200] [--beam 5]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                yield line.split(":")[0], int(line.split()[1]) / 1024


def child(args):
    """One setting in this fresh process: load, translate every sentence, report memory."""
    import leanseq
    t = leanseq.Translator(args.checkpoint, inter_threads=args.child)
    lines = [line.strip() for line in open(args.input, encoding="utf-8") if line.strip()][: args.sentences]
    loaded = dict(rss_mib())["VmRSS"]
    futures = [t.translate_async([line], beam=args.beam) for line in lines]
    texts = [f.result()[0].text for f in futures]
    print(json.dumps({"inter_threads": args.child, "rss_loaded_mib": round(loaded, 1),
                      "peak_rss_mib": round(dict(rss_mib())["VmHWM"], 1), "texts": texts}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint")
    p.add_argument("input")
    p.add_argument("--inter", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sentences", type=int, default=200)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    import leanseq
    lines = [line.strip() for line in open(args.input, encoding="utf-8") if line.strip()][: args.sentences]
    speeds = {1: [], args.inter: []}
    outputs = {}
    for r in range(args.rounds):
        for n in ((1, args.inter) if r % 2 == 0 else (args.inter, 1)):
            # inter_threads (and the threads it implies) are the process's: a translator made for the round.
            t = leanseq.Translator(args.checkpoint, inter_threads=n)
            start = time.monotonic()
            futures = [t.translate_async([line], beam=args.beam) for line in lines]
            outputs[n] = [f.result()[0].text for f in futures]
            speeds[n].append(len(lines) / (time.monotonic() - start))
    memory = {}
    for n in (1, args.inter):
        out = subprocess.run([sys.executable, __file__, args.checkpoint, args.input, "--child", str(n),
                              "--sentences", str(args.sentences), "--beam", str(args.beam)],
                             capture_output=True, text=True, check=True)
        memory[n] = json.loads(out.stdout.strip().splitlines()[-1])
    med = {n: statistics.median(v) for n, v in speeds.items()}
    print(json.dumps({
        "checkpoint": args.checkpoint, "sentences": len(lines), "beam": args.beam, "rounds": args.rounds,
        "cpus": os.cpu_count(), "sentences_per_second": {str(n): [round(x, 2) for x in v] for n, v in speeds.items()},
        "median_sentences_per_second": {str(n): round(v, 2) for n, v in med.items()},
        "speedup": round(med[args.inter] / med[1], 3),
        "same_translations": outputs[1] == outputs[args.inter] and memory[1]["texts"] == memory[args.inter]["texts"],
        "rss_loaded_mib": {str(n): memory[n]["rss_loaded_mib"] for n in memory},
        "peak_rss_mib": {str(n): memory[n]["peak_rss_mib"] for n in memory},
        "checkpoint_mib": round(os.path.getsize(args.checkpoint) / 2**20, 1),
    }, indent=1))


if __name__ == "__main__":
    main()
