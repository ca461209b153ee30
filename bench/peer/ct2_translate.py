#!/usr/bin/python3
"""CTranslate2's side of bench/peer/ctranslate2.sh, and its table.

    ct2_translate.py convert FAIRSEQ_CHECKPOINT DATA_DIR OUT_DIR [--quantization int8]
    ct2_translate.py translate --model DIR --pieces FILE [--spm MODEL] --out HYP --compute-type T
        --threads N [--inter-threads R] --beam B --batch-size S --max-length L --lenpen P
    ct2_translate.py record OUT.json --tool T --compute-type T --batch-size S --round R --log L
        --hyp H [--bleu B] [--fairseq-hyp F]
    ct2_translate.py table DIR [--limits LIMITS]
        (every DIR/*.json: a Markdown table of medians and ratios, then JSON; LIMITS/TYPE.bBATCH.json,
        leanseq-decode-bench's output for the model's shape, adds each tool's fraction of the
        products' limit: the products' time alone per sentence times its sentences/s)

convert runs CTranslate2's fairseq converter (ct2-fairseq-converter) in the process that
fairseq_cli311.py prepares, so fairseq 0.12.2 imports on Debian 12 as it does for training. The
checkpoints are the ones this machine trained, so the converter may unpickle them.

translate loads a converted model (not timed), then translates the subword pieces of FILE with
translate_batch (beam B, max_batch_size S sentences per batch, which CTranslate2 sorts by length,
as leanseq translate sorts its buffer; with --inter-threads R, R replicas of --threads threads take
batches in parallel) and turns each result into text with the SentencePiece model
(without one, its tokens joined by spaces);
the seconds from the first call to the last detokenized line are timed, as leanseq translate times
its search and detokenization, and printed as "translated N sentences ... : X sentences/s".
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # noqa: E402  (the sentences/s line's parser, shared with fairseq.sh's table)


def convert(args):
    import fairseq_cli311

    sys.argv = ["ct2-fairseq-converter", "--model_path", args.checkpoint, "--data_dir", args.data_dir,
                "--output_dir", args.out_dir, "--unsafe_deserialization", "--force"]
    if args.quantization:
        sys.argv += ["--quantization", args.quantization]
    fairseq_cli311.prepare_fairseq()
    from ctranslate2.converters import fairseq as converter

    converter.main()
    return 0


def translate(args):
    import ctranslate2
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=args.spm) if args.spm else None
    with open(args.pieces, encoding="utf-8") as f:
        sources = [line.split() for line in f.read().splitlines()]
    model = ctranslate2.Translator(args.model, device="cpu", compute_type=args.compute_type,
                                   inter_threads=args.inter_threads, intra_threads=args.threads)
    start = time.perf_counter()
    out = model.translate_batch(sources, max_batch_size=args.batch_size, batch_type="examples",
                                beam_size=args.beam, max_decoding_length=args.max_length,
                                length_penalty=args.lenpen)
    lines = [sp.decode_pieces(r.hypotheses[0]) if sp else " ".join(r.hypotheses[0]) for r in out]
    seconds = time.perf_counter() - start
    tokens = sum(len(r.hypotheses[0]) + 1 for r in out)  # with </s>, as leanseq counts
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    sys.stderr.write("ctranslate2 %s: translated %d sentences (%d target tokens) in %.1f s: %.2f sentences/s\n"
                     % (ctranslate2.__version__, len(lines), tokens, seconds, len(lines) / seconds))
    return 0


def backend(log_text):
    """The CPU, ISA and product backends CTranslate2 logs at load time with CT2_VERBOSE=1."""
    picked = {}
    for key, pattern in (("cpu", r"CPU: (.*)"), ("isa", r"Selected ISA: (\S+)"), ("mkl", r"Use Intel MKL: (\S+)"),
                         ("sgemm", r"SGEMM backend: (.*)"), ("gemm_s8", r"GEMM_S8 backend: (.*)")):
        m = re.search(pattern, log_text)
        if m:
            picked[key] = m.group(1).strip()
    return picked


def record(args):
    with open(args.log, encoding="utf-8", errors="replace") as f:
        log_text = f.read()
    bleu = None
    if args.bleu:
        with open(args.bleu, encoding="utf-8") as f:
            bleu = round(json.load(f)["score"], 2)
    identical, sentences = results.identical_lines(args.hyp, args.fairseq_hyp) if args.fairseq_hyp else (None, None)
    try:
        sps = results.sentences_per_second(log_text)
    except ValueError as e:
        sys.stderr.write("%s: %s\n" % (args.log, e))
        return 1
    out = {"tool": args.tool, "compute_type": args.compute_type, "batch_size": args.batch_size,
           "round": args.round, "sentences_per_second": sps, "bleu": bleu,
           "identical_to_fairseq": identical, "sentences": sentences}
    if args.tool == "ctranslate2":
        out["backend"] = backend(log_text)
    results.write_record(args.out, out)
    return 0


def show(summary, key):
    return "-" if not summary or summary[key] is None else summary[key]


def products_alone(limits, batch, ctype, decoders=1):
    """Seconds per sentence that leanseq-decode-bench's weight products take alone, or None: timed
    at one decoder's threads, and divided by the decoders that run side by side (--decoders)."""
    path = os.path.join(limits or "", "%s.b%d.json" % (ctype, batch))
    if not limits or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        ms = json.load(f)["contenders"][0].get("products_alone_ms_per_sentence")
    return ms / 1e3 / decoders if ms else None


def fraction(alone, summary):
    return round(alone * summary["sentences_per_second"], 3) if alone and summary else None


def table(args):
    runs = results.read_records(args.dir)
    groups = {}
    for run in runs:
        groups.setdefault((run["batch_size"], run["tool"], run["compute_type"]), []).append(run)
    summary = {}
    for (batch, tool, ctype), group in groups.items():
        summary.setdefault(batch, {}).setdefault(tool, {})[ctype] = {
            "sentences_per_second": statistics.median(r["sentences_per_second"] for r in group),
            "per_round": [r["sentences_per_second"] for r in sorted(group, key=lambda r: r["round"])],
            "bleu": group[0]["bleu"], "identical_to_fairseq": group[0]["identical_to_fairseq"],
            "sentences": group[0]["sentences"]}
    print("| batch | compute type | CTranslate2 sentences/s | leanseq sentences/s | ratio | BLEU CT2 / leanseq "
          "| identical to fairseq-generate, CT2 / leanseq | fraction of the products' limit, CT2 / leanseq |")
    print("|---|---|---|---|---|---|---|---|")
    ratios, fractions = {}, {}
    for batch in sorted(summary, reverse=True):
        ct2, ours = summary[batch].get("ctranslate2", {}), summary[batch].get("leanseq", {})
        for ctype in sorted(set(ct2) | set(ours), key=lambda t: (t != "float32", t)):
            a, b = ct2.get(ctype), ours.get(ctype)
            ratio = "%.2fx" % (b["sentences_per_second"] / a["sentences_per_second"]) if a and b else ""
            alone = products_alone(args.limits, batch, ctype, args.decoders)
            # CTranslate2's fraction only where its replicas are the layout the limit was timed for.
            shares = {"ctranslate2": fraction(alone, a) if args.ct2_replicas == args.decoders else None,
                      "leanseq": fraction(alone, b)}
            if alone:
                fractions.setdefault(batch, {})[ctype] = dict(shares, products_alone_seconds_per_sentence=alone)
            print("| %d | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s |" % (
                batch, ctype, "%.1f" % a["sentences_per_second"] if a else "-",
                "%.1f" % b["sentences_per_second"] if b else "-", ratio,
                show(a, "bleu"), show(b, "bleu"), show(a, "identical_to_fairseq"), show(b, "identical_to_fairseq"),
                show(shares, "ctranslate2"), show(shares, "leanseq")))
        if ct2 and "int8" in ours:
            best_type = max(ct2, key=lambda t: ct2[t]["sentences_per_second"])
            ratios[batch] = {"leanseq_int8_over_best_ctranslate2": round(
                ours["int8"]["sentences_per_second"] / ct2[best_type]["sentences_per_second"], 3),
                "best_ctranslate2_type": best_type}
            print("| %d | leanseq int8 / CT2's fastest (%s) | | | %.2fx | | | |"
                  % (batch, best_type, ratios[batch]["leanseq_int8_over_best_ctranslate2"]))
    backends = [r["backend"] for r in runs if r.get("backend")]
    print(json.dumps({"medians": summary, "ratios": ratios, "fractions_of_products_limit": fractions,
                      "ctranslate2_backend": backends[0] if backends else {},
                      "runs": runs}))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("convert")
    p.add_argument("checkpoint")
    p.add_argument("data_dir")
    p.add_argument("out_dir")
    p.add_argument("--quantization")
    p = sub.add_parser("translate")
    for name in ("--model", "--pieces", "--out", "--compute-type"):
        p.add_argument(name, required=True)
    p.add_argument("--spm", help="the SentencePiece model that detokenizes (default: tokens joined by spaces)")
    p.add_argument("--inter-threads", type=int, default=1,
                   help="replicas translating batches in parallel, each with --threads threads (default 1)")
    for name in ("--threads", "--beam", "--batch-size", "--max-length"):
        p.add_argument(name, type=int, required=True)
    p.add_argument("--lenpen", type=float, required=True)
    p = sub.add_parser("record")
    p.add_argument("out")
    for name in ("--tool", "--compute-type", "--log", "--hyp"):
        p.add_argument(name, required=True)
    p.add_argument("--bleu", help="leanseq score's JSON of the hypotheses (default: no BLEU)")
    p.add_argument("--fairseq-hyp", help="lines to count identical ones against (default: none)")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--round", type=int, required=True)
    p = sub.add_parser("table")
    p.add_argument("dir")
    p.add_argument("--limits", help="leanseq-decode-bench's outputs, TYPE.bBATCH.json (default: no fractions)")
    p.add_argument("--decoders", type=int, default=1,
                   help="leanseq's workers, the decoders side by side that the limits' threads are one of (default 1)")
    p.add_argument("--ct2-replicas", type=int, default=1,
                   help="CTranslate2's replicas: its fraction is given where they equal --decoders (default 1)")
    args = parser.parse_args()
    return {"convert": convert, "translate": translate, "record": record, "table": table}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
