#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, CMake, ninja, nvcc and Python torch (whose wheel holds a CUDA
# LibTorch): builds leanseq with the CUDA kernels and runs its tests (the CUDA checks included),
# the command line on the GPU and the GPU benchmarks. It builds the most the machine allows: the
# leanseq executable (charts only where cairo is found), then translate, serve and train --amp run
# on the GPU; else the training library (-DLEANSEQ_CLI=OFF: no cpp-httplib or CLI11 needed), so
# that mixed precision is tested and timed; else the model stack alone (-DLEANSEQ_MODELS_ONLY=ON,
# without ICU and oneDNN). Benchmarks: the SAN/AAN
# decoding benchmark (batch 64 at output lengths 30 and 100, batch 1 at 30; with the operator
# counts of --count-ops: all, those that launch a kernel, the matrix products), float16/bfloat16
# decoding against float32, and float16/bfloat16 training against float32. JSON results go to
# $OUT (default build-gpu/out). --bench-only skips the tests, --tests-only the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build-gpu/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PATH=/usr/local/cuda/bin:$PATH
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DLEANSEQ_CUDA=ON -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CUDA_ARCHITECTURES=90)
# jemalloc where the machine has it (libjemalloc-dev), the system's malloc otherwise.
jemalloc=OFF
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do [ -e "$d/libjemalloc.so" ] && jemalloc=ON; done
common+=(-DLEANSEQ_JEMALLOC=$jemalloc)
if cmake -S . -B build-gpu "${common[@]}" -DLEANSEQ_MODELS_ONLY=OFF -DLEANSEQ_CLI=ON -DLEANSEQ_PYTHON=OFF \
    > "$OUT/configure.log" 2>&1; then
  echo "build: the leanseq executable, the training library and the model stack"
elif rm -rf build-gpu && cmake -S . -B build-gpu "${common[@]}" -DLEANSEQ_MODELS_ONLY=OFF -DLEANSEQ_CLI=OFF \
    -DLEANSEQ_PYTHON=OFF > "$OUT/configure.log" 2>&1; then
  echo "build: the training library and the model stack (cpp-httplib, CLI11, gumbo or CLD2 missing: no leanseq executable)"
else
  rm -rf build-gpu
  cmake -S . -B build-gpu "${common[@]}" -DLEANSEQ_MODELS_ONLY=ON > "$OUT/configure.log"
  echo "build: the model stack alone (ICU or oneDNN missing: no training tests)"
fi
cmake --build build-gpu -j "$(nproc)" > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
if [ "${1:-}" != --bench-only ]; then
  # Each test binary directly (test discovery differs between CMake versions); a failure is reported
  # and the benchmarks still run.
  for t in build-gpu/tests/test_*; do
    [ -x "$t" ] || continue
    "$t" > "$OUT/$(basename "$t").log" 2>&1 && r=ok || r=FAILED
    echo "$(basename "$t"): $r, $(grep -cE '^\[       OK \]' "$OUT/$(basename "$t").log") passed," \
      "$(grep -cE '^\[  SKIPPED \]' "$OUT/$(basename "$t").log") skipped; failed: $(grep -E '^\[  FAILED  \] [A-Za-z]' "$OUT/$(basename "$t").log" | sort -u | tr '\n' ' ')"
  done
  # The CUDA checks by name: the kernels, compute types, and decoding on the GPU scoring the CPU's
  # hypotheses alike (translate --device cuda runs this search).
  grep -hE '^\[ *(OK|FAILED|SKIPPED) *\] .*Cuda' "$OUT"/test_*.log | sort -u || true
fi
# The command line on the GPU, with the checkpoint and data an older leanseq wrote
# (tests/fixtures/pre_engine): translate as on the CPU, serve, and train --amp with a resume.
if [ -x build-gpu/leanseq ] && [ "${1:-}" != --bench-only ]; then
  fx=tests/fixtures/pre_engine/seq2seq cli=build-gpu/leanseq
  $cli translate --checkpoint $fx/checkpoint_last.pt -i $fx/test.src -o "$OUT/translate_cpu.txt" --beam 4 \
    2> "$OUT/translate_cpu.log"
  $cli translate --checkpoint $fx/checkpoint_last.pt -i $fx/test.src -o "$OUT/translate_cuda.txt" --beam 4 \
    --device cuda 2> "$OUT/translate_cuda.log"
  echo "translate --device cuda: $(cmp -s "$OUT/translate_cpu.txt" "$OUT/translate_cuda.txt" && echo "the CPU's translations" \
    || echo "DIFFERENT from the CPU's ($(diff "$OUT/translate_cpu.txt" "$OUT/translate_cuda.txt" | grep -c '^<') lines)")"
  $cli serve --checkpoint $fx/checkpoint_last.pt --device cuda --port 0 > "$OUT/serve.log" 2>&1 &
  serve_pid=$!
  url=""
  for _ in $(seq 60); do
    url=$(grep -oE 'http://[0-9.]+:[0-9]+' "$OUT/serve.log" | head -1) && [ -n "$url" ] && break
    sleep 1
  done
  reply=$(curl -s "$url/translate" -H 'Content-Type: application/json' -d '{"q": "a 3 a 5", "source": "src", "target": "tgt"}' || true)
  kill -TERM $serve_pid; wait $serve_pid && r=ok || r="exit $?"
  echo "serve --device cuda: reply $reply; stop: $r"
  work=$(mktemp -d)
  $cli train --arch transformer_tiny --data $fx/data --save-dir "$work/ck" --device cuda --amp --max-update 30 \
    --set batch.max_tokens=500 > "$OUT/train_amp.log" 2>&1 && r=ok || r=FAILED
  $cli train --arch transformer_tiny --data $fx/data --save-dir "$work/ck" --device cuda --amp --max-update 60 \
    --set batch.max_tokens=500 --resume >> "$OUT/train_amp.log" 2>&1 && r2=ok || r2=FAILED
  echo "train --device cuda --amp: $r; resumed: $r2, $(grep -c 'resumed from' "$OUT/train_amp.log") resume line(s)"
  rm -rf "$work"
fi
[ "${1:-}" = --tests-only ] && exit 0
A=transformer_iwslt_de_en
archs=$A,${A}_san,${A}_aan,${A}_san_aan,${A}_san_aan:decoder.average_attention_ffn=false,${A}_san_aan:decoder.average_attention_fold=true
for run in "64 30 640" "64 100 320" "1 30 30"; do
  read -r bs len n <<< "$run"
  build-gpu/bench/leanseq-decode-bench --device cuda --arch "$archs" --length "$len" --beam 5 --batch-size "$bs" \
    --sentences "$n" --rounds 5 --count-ops > "$OUT/decode_cuda_b${bs}_l$len.json" 2> "$OUT/decode_cuda_b${bs}_l$len.err"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('batch', j['batch_size'], 'length', j['length'], *[(c['name'], round(c['median_sentences_per_second'], 1), round(c['ratio_to_first'], 2), round(c['operators_per_step']), round(c['launching_operators_per_step']), round(c['matrix_products_per_step'])) for c in j['contenders']])" "$OUT/decode_cuda_b${bs}_l$len.json"
done
# Compute types on the GPU: float32 against float16 and bfloat16 products (the tests above check
# their outputs against float32: ComputeTypes.HalfTypesOnCudaStayCloseToFloat32).
build-gpu/bench/leanseq-decode-bench --device cuda --arch transformer_small,transformer_small:compute_type=float16,transformer_small:compute_type=bfloat16 \
  --length 30 --beam 5 --batch-size 64 --sentences 640 --rounds 5 > "$OUT/decode_cuda_compute_types.json" 2> "$OUT/decode_cuda_compute_types.err"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(*[(c['name'], round(c['median_sentences_per_second'], 1), round(c['ratio_to_first'], 2)) for c in j['contenders']])" "$OUT/decode_cuda_compute_types.json"

# Mixed-precision training (the training library's build only): float32 against train --amp.
if [ -x build-gpu/bench/leanseq-train-bench ]; then
  for a in transformer_small transformer_wmt_en_de_big; do
    build-gpu/bench/leanseq-train-bench --device cuda --arch $a,$a:amp=float16,$a:amp=bfloat16 --length 30 \
      --batch-size 128 --steps 20 --rounds 3 > "$OUT/train_cuda_amp_$a.json" 2> "$OUT/train_cuda_amp_$a.err"
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('train', *[(c['name'], round(c['median_target_tokens_per_second']), round(c['speed_ratio_to_first'], 2)) for c in j['contenders']])" "$OUT/train_cuda_amp_$a.json"
  done
fi
