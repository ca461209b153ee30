#!/usr/bin/env bash
# leanseq and CTranslate2 side by side on the model of an Argos Translate package, the files
# LibreTranslate serves: argos_model.py writes one of their shape (6+6 layers, 512 dimensions, a
# 32k vocabulary, seeded random weights) with CTranslate2's own converter, in float32 and int8;
# CTranslate2 translates its model/ directory and leanseq the package as it is (`leanseq translate
# --checkpoint PACKAGE`), the same tokens, beam, batch size, threads and length limit, alternating
# which goes first, round by round; prints one Markdown table of medians and ratios (and its JSON),
# and how many of leanseq's translations are CTranslate2's. Not part of the build or the tests.
#
#   [CT2_SRC=/path/to/CTranslate2] bench/peer/argos.sh [--work build/peer-argos] [--rounds 3]
#       [--threads 2] [--batch-sizes "32 1"] [--compute-types "int8 float32"] [--beam 4]
#       [--max-length 40] [--sentences 256] [--ct2-replicas 1] [--leanseq-workers 1]
#       [--leanseq build/leanseq]
#
# --ct2-replicas R runs CTranslate2 as R replicas (inter_threads) of threads/R threads each, its
# layout for a server of several requests at once; --leanseq-workers W runs leanseq's translate
# as W workers of threads/W threads over one copy of the model (`translate --workers`).
# The random weights never end a sentence early (argos_model.py), so each tool decodes
# --max-length steps for every sentence. CTranslate2 is built as ctranslate2.sh does (CT2_SRC),
# or imported by /usr/bin/python3 as it is. README.md beside this file has the details.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work="$root/build/peer-argos" rounds=3 threads=2 batch_sizes="32 1" compute_types="int8 float32" beam=4
max_length=40 sentences=256 replicas=1 workers=1 leanseq="$root/build/leanseq" py=/usr/bin/python3

die() { echo "argos.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value (see the comment at the top of this script)"
  case "$1" in
    --work) work=$2 ;; --rounds) rounds=$2 ;; --threads) threads=$2 ;; --batch-sizes) batch_sizes=$2 ;;
    --compute-types) compute_types=$2 ;; --beam) beam=$2 ;; --max-length) max_length=$2 ;;
    --sentences) sentences=$2 ;; --ct2-replicas) replicas=$2 ;; --leanseq-workers) workers=$2 ;;
    --leanseq) leanseq=$2 ;;
    *) die "unknown option '$1' (see the comment at the top of this script)" ;;
  esac
  shift 2
done
for v in "$threads" "$rounds" "$beam" "$max_length" "$sentences" "$replicas" "$workers" $batch_sizes; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "'$v': --threads, --rounds, --beam, --max-length, --sentences, --ct2-replicas, --leanseq-workers and --batch-sizes take positive integers"
done
for t in $compute_types; do
  case "$t" in float32 | int8) ;; *) die "unknown compute type '$t' (float32, int8)" ;; esac
done
[ -n "${batch_sizes// /}" ] && [ -n "${compute_types// /}" ] || die "--batch-sizes and --compute-types need at least one value"
. "$here/fairseq_setup.sh"  # copy_tree, for ct2_setup.sh
. "$here/ct2_setup.sh"
. "$here/side_by_side.sh"
check_layout "$threads" "$replicas" "$workers"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
[ -x "$leanseq" ] || die "no leanseq binary at $leanseq (build it first: bash scripts/build.sh)"
mkdir -p "$work"
[ -z "${CT2_SRC:-}" ] || build_ctranslate2
$py -c 'import ctranslate2, numpy, torch' 2>/dev/null ||
  die "/usr/bin/python3 cannot import ctranslate2, numpy and torch (CT2_SRC=<CTranslate2 source tree> to build it here, or PYTHONPATH to your build; apt-get install python3-numpy python3-torch)"
if [ ! -f "$work/package.int8/model/model.bin" ] || [ "$(wc -l <"$work/input.txt")" != "$sentences" ]; then
  log "writing the Argos-shaped model (float32, int8) and $sentences sentences under $work"
  $py "$here/argos_model.py" "$work" --sentences "$sentences" >"$work/model.log" 2>&1 || die "argos_model.py failed; see $work/model.log"
fi

results="$work/results"
rm -rf "$results" && mkdir -p "$results"
kept_memory_env  # CTranslate2 keeps freed memory as leanseq does
decode() {  # tool type batch round
  local hyp="$work/hyp.$1.$2.b$3" logf="$work/decode.$1.$2.b$3.log"
  log "round $4: $1 translates ($2, batches of $3)"
  if [ "$1" = ctranslate2 ]; then
    env "${kept_memory[@]}" CT2_VERBOSE=1 $py "$here/ct2_translate.py" translate --model "$work/package.$2/model" --pieces "$work/input.txt" \
      --out "$hyp" --compute-type "$2" --threads $((threads / replicas)) --inter-threads "$replicas" \
      --beam "$beam" --batch-size "$3" \
      --max-length "$max_length" --lenpen 1 >"$logf" 2>&1 || die "CTranslate2 failed; see $logf"
  else
    "$leanseq" translate --checkpoint "$work/package.$2" --input-format tokens -i "$work/input.txt" -o "$hyp" \
      --compute-type "$2" --threads "$threads" --workers "$workers" --beam "$beam" --batch-size "$3" --max-len-a 0 \
      --max-len-b "$max_length" --lenpen 1 >"$logf" 2>&1 || die "leanseq translate failed; see $logf"
  fi
  [ "$(wc -l <"$hyp")" = "$sentences" ] || die "$hyp: not one line per sentence"
  $py "$here/ct2_translate.py" record "$results/$1.$2.b$3.$4.json" --tool "$1" --compute-type "$2" --batch-size "$3" \
    --round "$4" --log "$logf" --hyp "$hyp" >&2
}

alternate_decodes "$rounds" "$batch_sizes" "$compute_types"
echo "leanseq $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), CTranslate2 $($py -c 'import ctranslate2; print(ctranslate2.__version__)')," \
  "$(date +%F), $(cpu_summary), $threads threads (CTranslate2: $replicas replica(s), leanseq: $workers worker(s)), Argos-shaped model (6+6 layers, 512, 32k vocabulary, random weights)," \
  "$sentences sentences of 12-40 tokens, beam $beam, $max_length steps each, medians of $rounds alternated rounds;" \
  "CT2_FORCE_CPU_ISA=${CT2_FORCE_CPU_ISA:-unset}; CTranslate2's allocator: ${kept_memory[*]:-glibc malloc}"
$py "$here/ct2_translate.py" table "$results"
for b in $batch_sizes; do
  for t in $compute_types; do
    $py - "$work/hyp.leanseq.$t.b$b" "$work/hyp.ctranslate2.$t.b$b" "$t" "$b" <<'PY'
import sys
mine, theirs = (open(p, encoding="utf-8").read().splitlines() for p in sys.argv[1:3])
print("%s, batches of %s: %d of %d of leanseq's translations are CTranslate2's" % (
    sys.argv[3], sys.argv[4], sum(a == b for a, b in zip(mine, theirs)), len(theirs)))
PY
  done
done
