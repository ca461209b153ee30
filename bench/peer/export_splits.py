#!/usr/bin/python3
"""Writes the splits of a corpus made by `leanseq prepare` as text of subword symbols, one
sentence per line, for fairseq-preprocess:

    export_splits.py DATA OUT SRC TGT

DATA/<split>.<lang>.{idx,bin} hold int32 ids (each sentence ends with </s>) after a 16-byte header
(8 bytes of magic, the sentence count) and count+1 int64 offsets; DATA/dict.<lang>.txt is a
fairseq dictionary whose line i is id i + 4. fairseq-preprocess given the same dictionaries turns
these lines back into the same ids, so both tools train on the same sentence pairs.
"""
import os
import struct
import sys

import numpy


def read_dictionary(path):
    symbols = ["<s>", "<pad>", "</s>", "<unk>"]
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").rsplit(" ", 1)
            if len(fields) != 2:
                sys.exit("%s:%d: expected '<symbol> <count>'" % (path, number))
            symbols.append(fields[0])
    return symbols


def export(prefix, symbols, out_path):
    with open(prefix + ".idx", "rb") as f:
        header = f.read(16)
        if len(header) != 16:
            sys.exit(prefix + ".idx: too short")
        (count,) = struct.unpack("<q", header[8:])
        offsets = numpy.fromfile(f, dtype="<i8", count=count + 1)
    ids = numpy.fromfile(prefix + ".bin", dtype="<i4")
    if len(offsets) != count + 1 or offsets[-1] != len(ids):
        sys.exit(prefix + ": index and data disagree")
    tmp = out_path + ".part"
    with open(tmp, "w", encoding="utf-8") as out:
        for i in range(count):
            sentence = ids[offsets[i]:offsets[i + 1] - 1]  # without the final </s>
            out.write(" ".join(symbols[t] for t in sentence) + "\n")
    os.replace(tmp, out_path)
    return count


def main():
    if len(sys.argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    data, out, src, tgt = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    for lang in (src, tgt):
        symbols = read_dictionary(os.path.join(data, "dict.%s.txt" % lang))
        for split in ("train", "valid", "test"):
            n = export(os.path.join(data, "%s.%s" % (split, lang)), symbols, os.path.join(out, "%s.%s" % (split, lang)))
            print("%s.%s: %d sentences" % (split, lang, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
