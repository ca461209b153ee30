#!/usr/bin/env bash
# Fuzzes leanseq's readers of untrusted input with libFuzzer + AddressSanitizer + UBSan.
#   scripts/fuzz.sh TARGET SECONDS    one target: pickle, torch_file, checkpoint, dictionary, indexed, request,
#                                     bpe_codes, tokenize, config, ctranslate2, http
#   scripts/fuzz.sh all SECONDS       each target for SECONDS
# Each run starts from fuzz/corpus/TARGET (inputs that once crashed a reader, kept as regression
# tests) and seeds made by fuzz/make_seeds (with ../shared's fairseq checkpoints when present).
# A crash, a leak, an out-of-memory (2 GB) or a hang (10 s per input) fails the run; the input is
# written to build-fuzz/artifacts/ to be added to fuzz/corpus/TARGET once fixed. LEANSEQ_FUZZ_SEED
# fixes libFuzzer's random seed (scripts/test.sh sets 1, so that its runs repeat); 0 or unset: a
# new seed each run.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(pickle torch_file checkpoint dictionary indexed request bpe_codes tokenize config ctranslate2 http)
if [ $# -ne 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS (targets: ${targets[*]})" >&2
  exit 2
fi
if [ "$1" = all ]; then
  run=("${targets[@]}")
elif [[ " ${targets[*]} " == *" $1 "* ]]; then
  run=("$1")
else
  echo "scripts/fuzz.sh: unknown target '$1' (targets: ${targets[*]})" >&2
  exit 2
fi
bash scripts/install-deps.sh
# fuzz_http links the main build's libraries (the model and decoding under the server).
[ -f build/libleanseq_decode.a ] || bash scripts/build.sh
cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$(nproc)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"
shared=""
[ -d ../shared/fixtures/fairseq-pt ] && shared=../shared
./build-fuzz/make_seeds "$work/seeds" $shared
mkdir -p build-fuzz/artifacts
for t in "${run[@]}"; do
  mkdir -p "$work/new/$t" "fuzz/corpus/$t" "$work/seeds/$t"
  echo "fuzz_$t: $2 s from $(ls "fuzz/corpus/$t" | wc -l) regression inputs and $(ls "$work/seeds/$t" | wc -l) seeds"
  # New inputs go to a scratch directory; the kept corpus only grows by hand, with crashers.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 LSAN_OPTIONS=suppressions=fuzz/lsan.supp \
    UBSAN_OPTIONS=print_stacktrace=1 \
    ./build-fuzz/fuzz_"$t" -max_total_time="$2" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -seed="${LEANSEQ_FUZZ_SEED:-0}" \
    -artifact_prefix=build-fuzz/artifacts/"$t"- -print_final_stats=1 \
    "$work/new/$t" "fuzz/corpus/$t" "$work/seeds/$t" 2> "$work/$t.log" || {
      tail -60 "$work/$t.log" >&2
      echo "fuzz_$t: FAILED (the input is in build-fuzz/artifacts/)" >&2
      exit 1
    }
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/$t.log" | tr '\n' ' '
  echo
done
echo "fuzzing: ${#run[@]} target(s) ran ${2} s each without a failure"
