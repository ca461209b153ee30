#!/usr/bin/env bash
# leanseq and CTranslate2 side by side on one fairseq model: a transformer trained by
# bench/peer/fairseq.sh is converted with CTranslate2's fairseq converter (float32 and int8) and
# imported by leanseq; both translate the same SentencePiece pieces of test2016 with beam 5, the same
# batch size, threads, maximum length 200 and length penalty 1, alternating which goes first, round
# by round; prints one Markdown table of medians and ratios (and its JSON). Not part of the build
# or the tests.
#
#   [CT2_SRC=/path/to/CTranslate2] FAIRSEQ_SRC=/path/to/fairseq-0.12.2 bench/peer/ctranslate2.sh
#       [--work build/peer-fairseq] [--run transformer.fairseq-tuned.1] [--rounds 3] [--threads 2]
#       [--batch-sizes "64 1"] [--compute-types "float32 int8"] [--data ../shared/data/multi30k]
#       [--ct2-replicas 1] [--leanseq-workers 1] [--leanseq build/leanseq]
#
# --ct2-replicas R runs CTranslate2 as R replicas (inter_threads) of threads/R threads each, and
# --leanseq-workers W leanseq's translate as W workers of threads/W threads over one copy of the
# model (`translate --workers`): each tool's layout for several cores serving many sentences.
#
# It needs a run of fairseq.sh under --work (its prepared data, and the fairseq checkpoint in
# runs/<--run>/ckpt; `fairseq.sh --families transformer --sides tuned` trains just that model),
# python3-sentencepiece, and CTranslate2: with CT2_SRC set to its source tree, it is built once under
# --work (CPU only, on Debian's oneDNN; ct2_setup.sh), else its Python module must be importable by
# /usr/bin/python3 (`pip install ctranslate2`, or a build of your own on PYTHONPATH). The table
# names CTranslate2's version and, from its load-time log (CT2_VERBOSE=1), the ISA and backends it
# picked: CTranslate2 runs its own kernels with AVX-512 only on Intel CPUs; on others, run once more
# with CT2_FORCE_CPU_ISA=AVX512 in the environment and report both. CTranslate2 runs with leanseq's
# allocator and policy preloaded (kept_memory_env, fairseq_setup.sh). README.md beside this file
# has the details.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work="$root/build/peer-fairseq" run=transformer.fairseq-tuned.1 rounds=3 threads=2 batch_sizes="64 1"
compute_types="float32 int8" data="$root/../shared/data/multi30k" leanseq="$root/build/leanseq"
replicas=1 workers=1 beam=5 max_length=200 lenpen=1 py=/usr/bin/python3

die() { echo "ctranslate2.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value (see the comment at the top of this script)"
  case "$1" in
    --work) work=$2 ;; --run) run=$2 ;; --rounds) rounds=$2 ;; --threads) threads=$2 ;;
    --batch-sizes) batch_sizes=$2 ;; --compute-types) compute_types=$2 ;; --data) data=$2 ;;
    --leanseq) leanseq=$2 ;; --ct2-replicas) replicas=$2 ;; --leanseq-workers) workers=$2 ;;
    *) die "unknown option '$1' (see the comment at the top of this script)" ;;
  esac
  shift 2
done
for v in "$threads" "$rounds" "$replicas" "$workers"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "'$v': --threads, --rounds, --ct2-replicas and --leanseq-workers take positive integers"
done
for b in $batch_sizes; do [[ "$b" =~ ^[1-9][0-9]*$ ]] || die "--batch-sizes: '$b' is not a positive integer"; done
for t in $compute_types; do
  case "$t" in float32 | int8) ;; *) die "unknown compute type '$t' (float32, int8)" ;; esac
done
[ -n "${batch_sizes// /}" ] && [ -n "${compute_types// /}" ] || die "--batch-sizes and --compute-types need at least one value"
. "$here/fairseq_setup.sh"
. "$here/ct2_setup.sh"
. "$here/side_by_side.sh"
check_layout "$threads" "$replicas" "$workers"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
check_fairseq
[ -x "$leanseq" ] || die "no leanseq binary at $leanseq (build it first: bash scripts/build.sh)"
[ -f "$data/test2016.en" ] || die "no Multi30k at $data (see bench/peer/fairseq.sh)"
dir="$work/runs/$run"
for f in "$dir/ckpt/checkpoint_last.pt" "$dir/hyp.en" "$work/data/spm.model" "$work/text/test.de" "$work/fairseq-data/dict.en.txt"; do
  [ -f "$f" ] || die "no $f: run bench/peer/fairseq.sh with --work $work first"
done
fs="$work/fairseq"  # fairseq.sh's built copy, for the converter
[ -f "$fs/.built" ] || die "no built fairseq copy under $work (run bench/peer/fairseq.sh first)"
[ -z "${CT2_SRC:-}" ] || build_ctranslate2
$py -c 'import ctranslate2, sentencepiece' 2>/dev/null ||
  die "/usr/bin/python3 cannot import ctranslate2 and sentencepiece (CT2_SRC=<CTranslate2 source tree> to build it here, pip install ctranslate2, or PYTHONPATH to your build; apt-get install python3-sentencepiece)"
out="$dir/ctranslate2"
mkdir -p "$out"

# The models: CTranslate2's conversions (one per type), and leanseq's import (fairseq.sh made it).
for t in $compute_types; do
  if [ ! -f "$out/model.$t/model.bin" ]; then
    log "converting $run for CTranslate2 ($t)"
    quant=() && [ "$t" = int8 ] && quant=(--quantization int8)
    FAIRSEQ_SRC="$fs" $py "$here/ct2_translate.py" convert \
      "$dir/ckpt/checkpoint_last.pt" "$work/fairseq-data" "$out/model.$t" "${quant[@]}" >"$out/convert.$t.log" 2>&1 ||
      die "the CTranslate2 conversion failed; see $out/convert.$t.log"
  fi
done
if [ ! -f "$dir/imported.pt" ]; then
  "$leanseq" import-fairseq --checkpoint "$dir/ckpt/checkpoint_last.pt" --data-dir "$work/fairseq-data" \
    --spm "$work/data/spm.model" -o "$dir/imported.pt" >"$dir/import.log" 2>&1 || die "import-fairseq failed; see $dir/import.log"
fi

results="$out/results"
rm -rf "$results" && mkdir -p "$results"
kept_memory_env  # CTranslate2 keeps freed memory as leanseq does
decode() {  # tool type batch round
  local name="$1.$2.b$3" hyp="$out/hyp.$1.$2.b$3.en" logf="$out/decode.$1.$2.b$3.log"
  log "round $4: $1 translates test2016 ($2, batches of $3)"
  if [ "$1" = ctranslate2 ]; then
    env "${kept_memory[@]}" CT2_VERBOSE=1 $py "$here/ct2_translate.py" translate --model "$out/model.$2" --pieces "$work/text/test.de" \
      --spm "$work/data/spm.model" --out "$hyp" --compute-type "$2" --threads $((threads / replicas)) --inter-threads "$replicas" \
      --beam "$beam" --batch-size "$3" --max-length "$max_length" --lenpen "$lenpen" >"$logf" 2>&1 || die "CTranslate2 failed; see $logf"
  else
    "$leanseq" translate --checkpoint "$dir/imported.pt" --input-format tokens -i "$work/text/test.de" -o "$hyp" \
      --compute-type "$2" --threads "$threads" --workers "$workers" --beam "$beam" --batch-size "$3" --max-len-b "$max_length" \
      --lenpen "$lenpen" >"$logf" 2>&1 || die "leanseq translate failed; see $logf"
  fi
  [ "$(wc -l <"$hyp")" = "$(wc -l <"$data/test2016.en")" ] || die "$hyp: not one line per test sentence"
  "$leanseq" score --ref "$data/test2016.en" --hyp "$hyp" --format json >"$out/bleu.$name.json"
  $py "$here/ct2_translate.py" record "$results/$name.$4.json" --tool "$1" --compute-type "$2" --batch-size "$3" \
    --round "$4" --log "$logf" --bleu "$out/bleu.$name.json" --hyp "$hyp" --fairseq-hyp "$dir/hyp.en" >&2
}

alternate_decodes "$rounds" "$batch_sizes" "$compute_types"

# The products' limit of each batch size and type: leanseq-decode-bench times the weight products a
# model of this shape (transformer_small's: fairseq.sh's recipe) makes per sentence, each shape
# alone at one decoder's threads (--threads over --leanseq-workers), for this vocabulary, the test
# set's mean source length and leanseq's mean output length; the table divides that time by the
# decoders side by side, then by each tool's time per sentence (CTranslate2's where its replicas
# are as many as leanseq's workers).
limits="$out/limits"
rm -rf "$limits" && mkdir -p "$limits"
bench="$(dirname "$leanseq")/bench/leanseq-decode-bench"
if [ -x "$bench" ]; then
  vocab=$(($(wc -l <"$work/fairseq-data/dict.en.txt") + 4))
  source_length=$(awk '{n += NF + 1} END {printf "%d", n / NR + 0.5}' "$work/text/test.de")
  for b in $batch_sizes; do
    for t in $compute_types; do
      tokens=$(sed -n 's/.*sentences (\([0-9]*\) target tokens).*/\1/p' "$out/decode.leanseq.$t.b$b.log")
      length=$(awk -v t="$tokens" -v n="$(wc -l <"$data/test2016.en")" 'BEGIN {printf "%d", t / n - 0.5}')
      log "the products' limit: $t, batches of $b, $source_length source and $length target tokens"
      "$bench" --arch "transformer_small:compute_type=$t" --vocab "$vocab" --source-length "$source_length" \
        --length "$length" --batch-size "$b" --sentences $((b < 64 ? 64 : b)) --rounds 1 --threads $((threads / workers)) \
        >"$limits/$t.b$b.json" 2>"$limits/$t.b$b.log" || die "leanseq-decode-bench failed; see $limits/$t.b$b.log"
    done
  done
else
  log "no $bench: the table has no fractions of the products' limit"
fi
echo "leanseq $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), CTranslate2 $($py -c 'import ctranslate2; print(ctranslate2.__version__)')," \
  "$(date +%F), $(cpu_summary), $threads threads (CTranslate2: $replicas replica(s), leanseq: $workers worker(s)), model $run, beam $beam, max length $max_length, length penalty $lenpen," \
  "medians of $rounds alternated rounds; CT2_FORCE_CPU_ISA=${CT2_FORCE_CPU_ISA:-unset}; CTranslate2's allocator: ${kept_memory[*]:-glibc malloc}"
$py "$here/ct2_translate.py" table "$results" --limits "$limits" --decoders "$workers" --ct2-replicas "$replicas"
