#!/usr/bin/env bash
# leanseq prepare and fairseq-preprocess side by side on one large corpus: wall time and the peak
# memory of each tool's whole process tree, alternated rounds. Not part of the build or the tests.
#
#   FAIRSEQ_SRC=/path/to/fairseq-0.12.2 bench/peer/prepare.sh [--pairs 3000000] [--workers 2]
#       [--rounds 2] [--work build/peer-prepare] [--data ../shared/data/multi30k]
#       [--src de --tgt en] [--leanseq build/leanseq]
#
# The corpus: make_corpus.py joins random pairs of --data's train.<src>/<tgt> (Multi30k, or the
# quick start's Bible corpus: any parallel text) into --pairs pairs. Once, leanseq prepare trains
# the joint 8000-piece SentencePiece model on it (timed and measured too: the whole job a user
# runs), and writes every pair as subword pieces for fairseq (export_splits.py). Then, per round,
# alternating which goes first:
#   leanseq prepare --spm-model (that model) --workers N on the raw text: SentencePiece encoding,
#     dictionaries and binarized files;
#   fairseq-preprocess --joined-dictionary --workers N on the pieces: dictionary and binarized
#     files (it does not encode: its input is already subword text).
# Both keep every pair (no length filter, no duplicate removal), so they binarize the same pairs.
# Memory is measured by measure.py (the sum of proportional set sizes of each process tree).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pairs=3000000 workers=2 rounds=2 work="$root/build/peer-prepare" data="$root/../shared/data/multi30k"
src=de tgt=en leanseq="$root/build/leanseq" py=/usr/bin/python3

die() { echo "prepare.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value (see the comment at the top of this script)"
  case "$1" in
    --pairs) pairs=$2 ;; --workers) workers=$2 ;; --rounds) rounds=$2 ;; --work) work=$2 ;;
    --data) data=$2 ;; --src) src=$2 ;; --tgt) tgt=$2 ;; --leanseq) leanseq=$2 ;;
    *) die "unknown option '$1' (see the comment at the top of this script)" ;;
  esac
  shift 2
done
[[ "$pairs" =~ ^[1-9][0-9]*$ && "$workers" =~ ^[1-9][0-9]*$ && "$rounds" =~ ^[1-9][0-9]*$ ]] ||
  die "--pairs, --workers and --rounds must be positive integers"
. "$here/fairseq_setup.sh"
check_fairseq
[ -x "$leanseq" ] || die "no leanseq binary at $leanseq (build it first: bash scripts/build.sh)"
[ -f "$data/train.$src" ] && [ -f "$data/train.$tgt" ] && [ -f "$data/valid.$src" ] ||
  die "no train.$src/train.$tgt/valid.$src at $data (--data: Multi30k, or the quick start's corpus)"
mkdir -p "$work"
work=$(cd "$work" && pwd)
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
measure() { "$py" "$here/measure.py" --label "$1" -- "${@:2}"; }

build_fairseq_copy

corpus="$work/corpus-$pairs"
if [ ! -f "$corpus/.done" ]; then
  log "making $pairs pairs from $data/train.$src/$tgt"
  rm -rf "$corpus" && mkdir -p "$corpus"
  $py "$here/make_corpus.py" "$data/train.$src" "$data/train.$tgt" "$pairs" "$corpus/train" "$src" "$tgt"
  cp "$data/valid.$src" "$data/valid.$tgt" "$corpus/"
  cp "$data/valid.$src" "$corpus/test.$src" && cp "$data/valid.$tgt" "$corpus/test.$tgt"  # export_splits.py wants one
  touch "$corpus/.done"
fi
keep_all=(--min-len 0 --max-len 1000000 --max-ratio 0)
results="$work/results.jsonl"
: >"$results"
log "leanseq prepare, the whole job (SentencePiece training included), --workers $workers"
rm -rf "$work/full"
measure leanseq-with-spm-training "$leanseq" prepare --src "$src" --tgt "$tgt" --train "$corpus/train" \
  --valid "$corpus/valid" --test "$corpus/test" --out "$work/full" --vocab-size 8000 --workers "$workers" "${keep_all[@]}" \
  2>"$work/full.log" | grep '^{"label"' | tee -a "$results"
if [ ! -f "$work/text/.done" ]; then
  log "writing every pair as subword pieces for fairseq-preprocess"
  rm -rf "$work/text"
  $py "$here/export_splits.py" "$work/full" "$work/text" "$src" "$tgt" >/dev/null
  touch "$work/text/.done"
fi

run_leanseq() {
  rm -rf "$work/leanseq-bin"
  measure "leanseq-prepare-round$1" "$leanseq" prepare --src "$src" --tgt "$tgt" --train "$corpus/train" \
    --valid "$corpus/valid" --out "$work/leanseq-bin" --spm-model "$work/full/spm.model" --workers "$workers" \
    "${keep_all[@]}" 2>"$work/leanseq.log" | grep '^{"label"' | tee -a "$results"
}
run_fairseq() {
  rm -rf "$work/fairseq-bin"
  measure "fairseq-preprocess-round$1" env OMP_NUM_THREADS="$workers" FAIRSEQ_SRC="$fs" "$py" \
    "$here/fairseq_cli311.py" preprocess --source-lang "$src" --target-lang "$tgt" --trainpref "$work/text/train" \
    --validpref "$work/text/valid" --destdir "$work/fairseq-bin" --joined-dictionary --workers "$workers" \
    2>"$work/fairseq.log" | grep '^{"label"' | tee -a "$results"
}
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then
    log "round $r: leanseq first"; run_leanseq "$r"; run_fairseq "$r"
  else
    log "round $r: fairseq first"; run_fairseq "$r"; run_leanseq "$r"
  fi
done
$py - "$results" "$pairs" "$workers" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def pick(prefix):
    return [r for r in rows if r["label"].startswith(prefix)]
ls, fs = pick("leanseq-prepare-"), pick("fairseq-preprocess-")
full = pick("leanseq-with-spm-training")[0]
med = lambda rs, k: statistics.median(r[k] for r in rs)
summary = {"pairs": int(sys.argv[2]), "workers": int(sys.argv[3]), "rounds": len(ls),
           "leanseq_s": med(ls, "wall_s"), "fairseq_s": med(fs, "wall_s"),
           "speedup": round(med(fs, "wall_s") / med(ls, "wall_s"), 2),
           "leanseq_peak_mib": max(r["peak_tree_mib"] for r in ls), "fairseq_peak_mib": max(r["peak_tree_mib"] for r in fs),
           "leanseq_with_spm_training_s": full["wall_s"], "leanseq_with_spm_training_peak_mib": full["peak_tree_mib"]}
print(json.dumps(summary))
PY
