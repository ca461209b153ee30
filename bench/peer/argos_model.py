#!/usr/bin/python3
"""The model of bench/peer/argos.sh: an Argos Translate package of the shape LibreTranslate's
language pairs have (an OpenNMT-py transformer, 6 encoder and 6 decoder layers, 512 dimensions,
2048 in the feed-forward layers, 8 heads, one 32,000-token vocabulary for both sides), with seeded
random weights, converted by CTranslate2's own OpenNMT-py converter (float32 and int8), and random
source sentences of its tokens.

    argos_model.py OUT_DIR [--sentences 256] [--vocab 32000] [--seed 7]

Writes OUT_DIR/package.float32/ and OUT_DIR/package.int8/ (metadata.json and model/, as Argos
Translate unpacks a package; no SentencePiece model: the input is tokens) and OUT_DIR/input.txt
(sentences of 12 to 40 tokens). The end-of-sentence token's output bias is -10, so that no
sentence ends before the length limit: with random weights, lengths would otherwise be whatever
the weights give, and both tools decode exactly as many steps.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "fixtures", "ctranslate2"))
import make  # noqa: E402  (the synthetic OpenNMT-py checkpoint of the CTranslate2 fixtures)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    from ctranslate2.converters.opennmt_py import OpenNMTPyConverter

    os.makedirs(args.out, exist_ok=True)
    vocab = make.onmt_vocab(args.vocab, args.seed)
    checkpoint = os.path.join(args.out, "onmt.pt")
    make.onmt_checkpoint(checkpoint, args.seed, "relu", 6, 6, 512, 2048, 8, vocab, vocab, tied=False, end_bias=-10.0)
    for quantization in ("float32", "int8"):
        package = os.path.join(args.out, "package." + quantization)
        OpenNMTPyConverter(checkpoint, unsafe_deserialization=True).convert(
            os.path.join(package, "model"), quantization=None if quantization == "float32" else quantization,
            force=True)
        with open(os.path.join(package, "metadata.json"), "w", encoding="utf-8") as f:
            json.dump({"package_version": "1.0", "from_code": "xx", "to_code": "yy",
                       "package_type": "translate"}, f)
    os.remove(checkpoint)
    rng = np.random.RandomState(args.seed)
    words = [t for t in vocab if not (t.startswith("<") and t.endswith(">"))]
    with open(os.path.join(args.out, "input.txt"), "w", encoding="utf-8") as f:
        for _ in range(args.sentences):
            f.write(" ".join(rng.choice(words, rng.randint(12, 41))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
