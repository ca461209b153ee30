#!/usr/bin/python3
"""How many of leanseq's translations equal CTranslate2's on a CTranslate2 model directory (or an
Argos Translate package's model/), greedy and beam 5, in float32.

    PYTHONPATH=<CTranslate2's python dir> ct2_compare.py MODEL_DIR [MODEL_DIR ...]
        [--input FILE] [--sentences 50] [--max-length 64] [--leanseq build/leanseq]

The input is FILE's lines (tokens of the model's source vocabulary, space-separated), or
--sentences random sequences of 3-12 of its tokens (seeded); a quantized model is read to float32
by both. Prints one line per model and search, then a JSON list of the counts.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures", "ctranslate2"))
import make  # noqa: E402  (the fixtures' reader of a model's source vocabulary)


def source_tokens(model_dir):
    return [t for t in make.source_vocabulary(model_dir) if t and not (t.startswith("<") and t.endswith(">"))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--input")
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--leanseq", default=os.path.join(ROOT, "build", "leanseq"))
    args = parser.parse_args()
    import ctranslate2

    counts = []
    for model in args.models:
        if args.input:
            with open(args.input, encoding="utf-8") as f:
                lines = f.read().splitlines()
        else:
            rng = random.Random(1)
            tokens = source_tokens(model)
            lines = [" ".join(rng.choice(tokens) for _ in range(rng.randint(3, 12))) for _ in range(args.sentences)]
        translator = ctranslate2.Translator(model, device="cpu", compute_type="float32", intra_threads=1)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
            f.write("".join(line + "\n" for line in lines))
            input_path = f.name
        try:
            for name, beam in (("greedy", 1), ("beam 5", 5)):
                theirs = [" ".join(r.hypotheses[0]) for r in translator.translate_batch(
                    [line.split() for line in lines], beam_size=beam, max_decoding_length=args.max_length,
                    length_penalty=1.0)]
                ours = subprocess.run(
                    [args.leanseq, "translate", "--checkpoint", model, "--input-format", "tokens", "-i", input_path,
                     "--compute-type", "float32", "--beam", str(beam), "--max-len-a", "0",
                     "--max-len-b", str(args.max_length), "--lenpen", "1"],
                    capture_output=True, text=True, check=True).stdout.splitlines()
                equal = sum(a == b for a, b in zip(ours, theirs))
                print("%s, %s: %d of %d lines equal CTranslate2's" % (model, name, equal, len(theirs)))
                counts.append({"model": model, "search": name, "equal": equal, "lines": len(theirs)})
        finally:
            os.unlink(input_path)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
