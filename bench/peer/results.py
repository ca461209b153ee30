#!/usr/bin/python3
"""Reads the logs of one side-by-side run, and prints the table of all runs.

    results.py record OUT.json --tool T --family F --round R --train-log L --decode-log D --bleu B
        [--same-model-log D2 --same-model-hyp H2 --hyp H]
    results.py table DIR     (every DIR/*.json: one Markdown table of medians and ratios, then JSON)

Training: updates in the budget, and target tokens per second of update time: leanseq's
"done: N updates, X target tokens/s" (target tokens over the seconds its updates took); fairseq's
epoch records, sum of wpb x updates over sum of train_wall (the seconds in train_step; fairseq
logs them rounded to whole seconds). Decoding: each tool's own sentences/s over test2016 (fairseq
generate's "Translated N sentences ... (X sentences/s"; leanseq translate's "X sentences/s"),
model loading excluded by both. BLEU: leanseq score (sacreBLEU 13a) on each tool's detokenized
output against the raw reference. For a fairseq run, --same-model-log and --same-model-hyp are
leanseq's translation of that fairseq model (imported): its sentences/s, and how many of its lines
are identical to fairseq's (--hyp).
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys


def leanseq_train(text):
    m = re.search(r"done: (\d+) updates, ([0-9.]+) target tokens/s", text)
    if not m:
        raise ValueError("no 'done: N updates, X target tokens/s' line")
    return int(m.group(1)), float(m.group(2))


def fairseq_train(text):
    tokens = seconds = 0.0
    updates = 0
    for line in text.splitlines():
        m = re.search(r"\| train \| (\{.*\})\s*$", line)
        if not m:
            continue
        record = json.loads(m.group(1))
        now = int(float(record["train_num_updates"]))
        tokens += float(record["train_wpb"]) * (now - updates)
        seconds += float(record["train_train_wall"])
        updates = now
    if updates == 0:
        raise ValueError("no fairseq epoch record ('| train | {...}')")
    return updates, tokens / seconds if seconds > 0 else 0.0


def sentences_per_second(text):
    m = re.search(r"Translated [0-9,]+ sentences .* \(([0-9.]+) sentences/s", text)
    if not m:
        m = re.search(r"translated \d+ sentences .*: ([0-9.]+) sentences/s", text)
    if not m:
        raise ValueError("no sentences/s line")
    return float(m.group(1))


def record(args):
    with open(args.train_log, encoding="utf-8", errors="replace") as f:
        train_text = f.read()
    with open(args.decode_log, encoding="utf-8", errors="replace") as f:
        decode_text = f.read()
    with open(args.bleu, encoding="utf-8") as f:
        bleu = json.load(f)["score"]
    try:
        updates, tps = (leanseq_train if args.tool == "leanseq" else fairseq_train)(train_text)
        sps = sentences_per_second(decode_text)
    except ValueError as e:
        sys.stderr.write("%s or %s: %s\n" % (args.train_log, args.decode_log, e))
        return 1
    out = {"tool": args.tool, "family": args.family, "round": args.round, "updates": updates,
           "target_tokens_per_second": round(tps, 1), "sentences_per_second": sps, "bleu": round(bleu, 2)}
    if args.same_model_log:
        with open(args.same_model_log, encoding="utf-8", errors="replace") as f:
            try:
                out["leanseq_sentences_per_second_on_this_model"] = sentences_per_second(f.read())
            except ValueError as e:
                sys.stderr.write("%s: %s\n" % (args.same_model_log, e))
                return 1
        out["identical_translations"], out["sentences"] = identical_lines(args.same_model_hyp, args.hyp)
    write_record(args.out, out)
    return 0


def identical_lines(ours, theirs):
    """(lines of file ours equal to the same line of file theirs, lines of theirs)."""
    with open(ours, encoding="utf-8") as a, open(theirs, encoding="utf-8") as b:
        mine, other = a.read().splitlines(), b.read().splitlines()
    return sum(x == y for x, y in zip(mine, other)), len(other)


def write_record(path, record):
    """Writes one run's JSON whole (through a temporary beside it) and prints it."""
    with open(path + ".part", "w") as f:
        json.dump(record, f)
    os.replace(path + ".part", path)
    print(json.dumps(record))


def read_records(directory):
    """Every run recorded in directory (its *.json), in name order."""
    runs = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            runs.append(json.load(f))
    return runs


def table(args):
    runs = read_records(args.dir)
    keys = ("updates", "target_tokens_per_second", "sentences_per_second", "bleu")
    medians = {}
    for run in runs:
        medians.setdefault((run["family"], run["tool"]), []).append(run)
    summary = {}
    for (family, tool), group in medians.items():
        summary.setdefault(family, {})[tool] = {k: statistics.median(r[k] for r in group) for k in keys}
        summary[family][tool]["rounds"] = len(group)
    print("| family | measure | leanseq | fairseq as installed | ratio | fairseq tuned | ratio |")
    print("|---|---|---|---|---|---|---|")
    names = {"updates": "updates in the budget", "target_tokens_per_second": "training, target tokens/s",
             "sentences_per_second": "decoding, sentences/s", "bleu": "test BLEU"}
    order = ["transformer", "dynamicconv", "fconv"]
    for family, tools in sorted(summary.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order)):
        ours = tools.get("leanseq")
        for k in keys:
            row = [family, names[k], "%g" % ours[k] if ours else "-"]
            for peer in ("fairseq-installed", "fairseq-tuned"):
                theirs = tools.get(peer)
                row.append("%g" % theirs[k] if theirs else "-")
                if k == "bleu" or not ours or not theirs or theirs[k] == 0:
                    row.append("")
                else:
                    row.append("%.2fx" % (ours[k] / theirs[k]))
            print("| " + " | ".join(row) + " |")
        same = [family, "fairseq's model decoded by fairseq and by leanseq, sentences/s", "-"]
        for peer in ("fairseq-installed", "fairseq-tuned"):
            group = medians.get((family, peer), [])
            if group and all("identical_translations" in r for r in group):
                theirs = statistics.median(r["sentences_per_second"] for r in group)
                ours_there = statistics.median(r["leanseq_sentences_per_second_on_this_model"] for r in group)
                identical = min(r["identical_translations"] for r in group)
                same += ["%g / %g" % (theirs, ours_there),
                         "%.2fx (%d of %d identical)" % (ours_there / theirs, identical, group[0]["sentences"])]
            else:
                same += ["-", ""]
        print("| " + " | ".join(same) + " |")
    print(json.dumps({"medians": summary, "runs": runs}))
    return 0


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    for flag in ("--tool", "--family", "--train-log", "--decode-log", "--bleu"):
        r.add_argument(flag, required=True)
    r.add_argument("--round", type=int, required=True)
    for flag in ("--same-model-log", "--same-model-hyp", "--hyp"):
        r.add_argument(flag)
    t = sub.add_parser("table")
    t.add_argument("dir")
    args = parser.parse_args()
    return record(args) if args.command == "record" else table(args)


if __name__ == "__main__":
    sys.exit(main())
