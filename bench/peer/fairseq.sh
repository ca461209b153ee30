#!/usr/bin/env bash
# leanseq and fairseq 0.12.2 side by side on this machine: the same data, dictionaries, presets,
# recipes, threads and wall-clock budget for training, then the same test set, beam and batch size
# for decoding; prints one table of ratios (and its JSON). Not part of the build or the tests.
#
#   FAIRSEQ_SRC=/path/to/fairseq-0.12.2 bench/peer/fairseq.sh [--minutes 6] [--threads 2]
#       [--rounds 1] [--families "transformer dynamicconv fconv"] [--work build/peer-fairseq]
#       [--data ../shared/data/multi30k] [--leanseq build/leanseq] [--decode-only]
#       [--compute-type float32] [--sides "leanseq installed tuned"] [--leanseq-bf16]
#
# --leanseq-bf16 trains leanseq's models in mixed precision, bfloat16 products over float32 master
# weights (`leanseq train --bf16`; float32 where the CPU has no AVX512_BF16), while fairseq trains
# in float32, its type on a CPU.
# --decode-only keeps the checkpoints and training logs of an earlier run under --work and decodes
# and scores again (after a change to leanseq's decoding, say). --compute-type is the type of
# leanseq's products when it translates (translate --compute-type: float32, int8, bfloat16, ...;
# docs/fast.md); fairseq decodes in float32, its only type on a CPU. Translations, decoding logs,
# scores and the table are kept per compute type, so a --decode-only run in another type leaves
# the earlier ones as they were. --sides picks which of the three runs per family to make (leanseq,
# fairseq as installed, fairseq tuned): `--sides tuned` trains only a fairseq model, e.g. for
# bench/peer/ctranslate2.sh.
#
# fairseq runs twice per family: as installed (in this shell's environment, OPENBLAS_* included),
# and tuned: with the best OpenBLAS kernels this CPU runs correctly (those OpenBLAS or leanseq
# picks with no OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE from the environment, after a check that torch's
# float32 products agree with float64 under them; else the environment's), leanseq's idle-thread
# settings and its allocator (jemalloc keeping freed memory, preloaded), so the table tells
# leanseq's own merit apart. The header line says which kernels each
# side ran. Data: Multi30k (https://github.com/multi30k/dataset, data/task1/raw: train, val and
# test_2016_flickr, de and en, gunzipped and renamed train.*, valid.*, test2016.*). Each fairseq model is also
# imported (leanseq import-fairseq) and decoded by leanseq: the same model decoded by both tools,
# with the number of identical translations. README.md beside this
# file lists what it needs and the changes fairseq_cli311.py makes so fairseq runs on Debian 12.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
minutes=6 threads=2 rounds=1 families="transformer dynamicconv fconv"
work="$root/build/peer-fairseq" data="$root/../shared/data/multi30k" leanseq="$root/build/leanseq"
beam=5 batch=64 py=/usr/bin/python3 decode_only=0 compute_type=float32 sides="leanseq installed tuned"
train_precision=() training_type=float32 training_products="oneDNN's sgemm"

die() { echo "fairseq.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  if [ "$1" = --decode-only ]; then decode_only=1; shift; continue; fi
  if [ "$1" = --leanseq-bf16 ]; then
    train_precision=(--bf16) training_type=bfloat16 training_products="bfloat16 on oneDNN under autocast"
    shift
    continue
  fi
  [ $# -ge 2 ] || die "$1 needs a value (see the comment at the top of this script)"
  case "$1" in
    --minutes) minutes=$2 ;; --threads) threads=$2 ;; --rounds) rounds=$2 ;;
    --families) families=$2 ;; --work) work=$2 ;; --data) data=$2 ;; --leanseq) leanseq=$2 ;;
    --compute-type) compute_type=$2 ;; --sides) sides=$2 ;;
    *) die "unknown option '$1' (see the comment at the top of this script)" ;;
  esac
  shift 2
done
[[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--minutes must be a number, got '$minutes'"
[[ "$threads" =~ ^[1-9][0-9]*$ && "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--threads and --rounds must be positive integers"
case "$compute_type" in
  auto | float32 | int8 | int8_float32 | bfloat16 | int8_bfloat16) ;;
  *) die "unknown --compute-type '$compute_type' (auto, float32, int8, int8_float32, bfloat16, int8_bfloat16)" ;;
esac
for s in $sides; do
  case "$s" in leanseq | installed | tuned) ;; *) die "unknown side '$s' (leanseq, installed, tuned)" ;; esac
done
[ -n "${sides// /}" ] || die "--sides names none of leanseq, installed, tuned"
for f in $families; do
  case "$f" in transformer | dynamicconv | fconv) ;; *) die "unknown family '$f' (transformer, dynamicconv, fconv)" ;; esac
done
. "$here/fairseq_setup.sh"
check_fairseq
[ -x "$leanseq" ] || die "no leanseq binary at $leanseq (build it first: bash scripts/build.sh)"
[ -f "$data/train.de" ] ||
  die "no Multi30k at $data (train.de, train.en, valid.*, test2016.*): give --data; where to get it: the comment at the top of this script"

[ "$decode_only" = 0 ] || [ -d "$work/runs" ] || die "--decode-only: no earlier run under $work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

build_fairseq_copy  # sets $fs
fs_env=()  # the environment fairseq runs in, beside the threads
fairseq() { env "${fs_env[@]}" "${threads_env[@]}" FAIRSEQ_SRC="$fs" "$py" "$here/fairseq_cli311.py" "$@"; }
threads_env=(OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads")

# One corpus for both: leanseq prepare's SentencePiece model, dictionaries and filtered pairs;
# fairseq-preprocess binarizes the same ids with the same dictionaries.
if [ ! -f "$work/fairseq-data/.done" ]; then
  log "preparing Multi30k de-en for both tools"
  rm -rf "$work/data" "$work/text" "$work/fairseq-data"
  "$leanseq" prepare --src de --tgt en --train "$data/train" --valid "$data/valid" --test "$data/test2016" \
    --out "$work/data" --vocab-size 8000 >"$work/prepare.log" 2>&1 || die "leanseq prepare failed; see $work/prepare.log"
  $py "$here/export_splits.py" "$work/data" "$work/text" de en >>"$work/prepare.log"
  fairseq preprocess --source-lang de --target-lang en --trainpref "$work/text/train" \
    --validpref "$work/text/valid" --testpref "$work/text/test" --destdir "$work/fairseq-data" \
    --srcdict "$work/data/dict.de.txt" --tgtdict "$work/data/dict.en.txt" --workers "$threads" \
    >>"$work/prepare.log" 2>&1 || die "fairseq-preprocess failed; see $work/prepare.log"
  touch "$work/fairseq-data/.done"
fi

# What leanseq gives itself, from its start-up line (e.g. "BLAS: OpenBLAS 0.3.21, Zen kernels;
# idle threads: OPENBLAS_THREAD_TIMEOUT=4, GOMP_SPINCOUNT=10000").
blas=$("$leanseq" --version | grep '^BLAS: ' || true)
kernels() { sed -n 's/^BLAS: OpenBLAS [^,]*, \([A-Za-z0-9]*\) kernels.*/\1/p' <<<"$1"; }
# The kernels with no OpenBLAS setting from the environment (OpenBLAS's own pick, or leanseq's
# better one for this CPU), used for tuned fairseq when torch's products are right under them.
best=$(kernels "$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$leanseq" --version | grep '^BLAS: ' || true)")
products_right() {  # CORETYPE: torch's float32 matrix products under it agree with float64's
  env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE="$1" "$py" -c "
import torch
torch.manual_seed(0)
a, b = torch.randn(300, 257), torch.randn(257, 301)
exact = a.double() @ b.double()
raise SystemExit(0 if ((a @ b).double() - exact).abs().max() <= 1e-5 * exact.abs().max() else 1)" 2>/dev/null
}
# The idle-thread settings leanseq takes where the environment has none, as NAME=VALUE words.
read -r -a idle <<<"$(env -u OPENBLAS_THREAD_TIMEOUT -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY "$leanseq" --version |
  sed -n 's/.*idle threads: //p' | tr -d ',')"
[ ${#idle[@]} -gt 0 ] || die "$leanseq --version names no idle-thread settings"
tuned=(-u OPENBLAS_L2_SIZE "${idle[@]}")
if [ -n "$best" ] && products_right "$best"; then
  tuned+=("OPENBLAS_CORETYPE=$best")
elif [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  tuned=("${idle[@]}")  # the environment's kernels, L2 size included
  log "fairseq tuned: ${best:-no} kernels without the environment's settings fail the product check; keeping ${OPENBLAS_CORETYPE}"
fi
kept_memory_env  # tuned fairseq keeps freed memory as leanseq does
tuned+=("${kept_memory[@]}")
installed_kernels="${OPENBLAS_CORETYPE:-chosen by OpenBLAS}"
log "leanseq: $blas"
log "fairseq installed: OpenBLAS kernels: $installed_kernels; tuned: env ${tuned[*]}"

common_fairseq=(--max-tokens 2048 --seed 1 --no-epoch-checkpoints --log-format json --log-interval 100
  --stop-time-hours "$($py -c "print($minutes / 60)")" --criterion label_smoothed_cross_entropy --label-smoothing 0.1)
adam=(--optimizer adam --adam-betas '(0.9,0.98)' --lr 0.001 --lr-scheduler inverse_sqrt --warmup-updates 400
  --weight-decay 0.0001)
dims=(--encoder-embed-dim 256 --encoder-ffn-embed-dim 1024 --encoder-layers 3 --encoder-attention-heads 4
  --decoder-embed-dim 256 --decoder-ffn-embed-dim 1024 --decoder-layers 3 --decoder-attention-heads 4)
recipe() {  # the fairseq flags of a family, matching configs/<family>_small_multi30k.yaml
  case "$1" in
    transformer) echo --arch transformer "${dims[@]}" --dropout 0.2 --share-all-embeddings "${adam[@]}" ;;
    dynamicconv) echo --arch lightconv_iwslt_de_en "${dims[@]}" --encoder-kernel-size-list '[3,7,15]' \
      --decoder-kernel-size-list '[3,7,15]' --encoder-conv-type dynamic --decoder-conv-type dynamic \
      --dropout 0.2 --attention-dropout 0.1 --weight-dropout 0.1 --input-dropout 0.0 --share-all-embeddings "${adam[@]}" ;;
    fconv) echo --arch fconv_iwslt_de_en --dropout 0.2 --optimizer nag --momentum 0.99 --lr 0.25 --clip-norm 0.1 \
      --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.1 ;;
  esac
}

results="$work/results.$compute_type"
rm -rf "$results" && mkdir -p "$results"
leanseq_translate() {  # checkpoint hypotheses log: test2016 with the table's beam, batch and threads
  "$leanseq" translate --checkpoint "$1" --beam "$beam" --batch-size "$batch" --threads "$threads" \
    --compute-type "$compute_type" -i "$data/test2016.de" -o "$2" >"$3" 2>&1 || die "leanseq translate failed; see $3"
}
run_leanseq() {  # family round
  [[ " $sides " == *" leanseq "* ]] || return 0
  local dir="$work/runs/$1.leanseq.$2"
  if fresh "$dir"; then
    log "$1, round $2: leanseq trains for $minutes min"
    "$leanseq" train -c "$root/configs/$1_small_multi30k.yaml" --data "$work/data" --save-dir "$dir/ckpt" \
      --max-minutes "$minutes" --threads "$threads" --seed 1 --set valid.bleu=false "${train_precision[@]}" \
      --set checkpoint.no_epoch_checkpoints=true >"$dir/train.log" 2>&1 || die "leanseq train failed; see $dir/train.log"
  fi
  log "$1, round $2: leanseq translates test2016"
  leanseq_translate "$dir/ckpt/checkpoint_last.pt" "$dir/hyp.$compute_type.en" "$dir/decode.$compute_type.log"
  finish "$1" leanseq "$2" "$dir" "$dir/hyp.$compute_type.en" "$dir/decode.$compute_type.log"
}
run_fairseq() {  # family round installed|tuned
  [[ " $sides " == *" $3 "* ]] || return 0
  local dir="$work/runs/$1.fairseq-$3.$2"
  fs_env=()
  [ "$3" = tuned ] && fs_env=("${tuned[@]}")
  if fresh "$dir"; then
    log "$1, round $2: fairseq ($3) trains for $minutes min"
    # shellcheck disable=SC2046 # the recipe's words are flags
    fairseq train "$work/fairseq-data" $(recipe "$1") "${common_fairseq[@]}" --save-dir "$dir/ckpt" \
      >"$dir/train.log" 2>&1 || die "fairseq train failed; see $dir/train.log"
  fi
  log "$1, round $2: fairseq ($3) translates test2016"
  fairseq generate "$work/fairseq-data" --path "$dir/ckpt/checkpoint_last.pt" --gen-subset test --beam "$beam" \
    --batch-size "$batch" --post-process sentencepiece >"$dir/generate.out" 2>"$dir/decode.log" ||
    die "fairseq generate failed; see $dir/decode.log"
  grep '^D-' "$dir/generate.out" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 >"$dir/hyp.en"
  log "$1, round $2: leanseq imports fairseq's ($3) model and translates test2016"
  "$leanseq" import-fairseq --checkpoint "$dir/ckpt/checkpoint_last.pt" --data-dir "$work/fairseq-data" \
    --spm "$work/data/spm.model" -o "$dir/imported.pt" >"$dir/import.log" 2>&1 || die "import-fairseq failed; see $dir/import.log"
  leanseq_translate "$dir/imported.pt" "$dir/hyp.imported.$compute_type.en" "$dir/decode.imported.$compute_type.log"
  finish "$1" "fairseq-$3" "$2" "$dir" "$dir/hyp.en" "$dir/decode.log" \
    --same-model-log "$dir/decode.imported.$compute_type.log" --same-model-hyp "$dir/hyp.imported.$compute_type.en" \
    --hyp "$dir/hyp.en"
}
fresh() {  # run directory: true when it is to be trained (again)
  if [ "$decode_only" = 1 ]; then
    [ -f "$1/ckpt/checkpoint_last.pt" ] || die "--decode-only: no earlier run in $1"
    return 1
  fi
  rm -rf "$1" && mkdir -p "$1"
}
finish() {  # family tool round dir hypotheses decode-log [results.py record's options]
  [ "$(wc -l <"$5")" = "$(wc -l <"$data/test2016.en")" ] || die "$5: not one line per test sentence"
  "$leanseq" score --ref "$data/test2016.en" --hyp "$5" --format json >"$4/bleu.$compute_type.json"
  $py "$here/results.py" record "$results/$1.$2.$3.json" --tool "$2" --family "$1" --round "$3" \
    --train-log "$4/train.log" --decode-log "$6" --bleu "$4/bleu.$compute_type.json" "${@:7}" >&2
}

# Rounds alternate which tool goes first (and, for fairseq, which setting).
turn=0
for round in $(seq 1 "$rounds"); do
  for family in $families; do
    if [ $((turn % 2)) = 0 ]; then
      run_leanseq "$family" "$round"; run_fairseq "$family" "$round" installed; run_fairseq "$family" "$round" tuned
    else
      run_fairseq "$family" "$round" tuned; run_fairseq "$family" "$round" installed; run_leanseq "$family" "$round"
    fi
    turn=$((turn + 1))
  done
done
echo "leanseq $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), fairseq 0.12.2, $(date +%F), $(nproc) cores," \
  "$threads threads, leanseq training in $training_type, $([ "$decode_only" = 1 ] && echo "training from an earlier run" || echo "$minutes min of training"), beam $beam, batches of $batch, leanseq decoding in $compute_type;" \
  "leanseq: $blas (training products: $training_products; float32 decoding: oneDNN on weights packed once); fairseq installed: OpenBLAS kernels $installed_kernels;" \
  "fairseq tuned: env ${tuned[*]}"
$py "$here/results.py" table "$results"
