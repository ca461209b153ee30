#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, CMake, ninja, nvcc and Python torch (whose wheel holds a CUDA
# LibTorch): builds leanseq with the CUDA kernels and runs its tests (the CUDA checks included) and
# the GPU benchmarks. With ICU and oneDNN found it builds the training library too
# (-DLEANSEQ_CLI=OFF: no cairo needed), so mixed-precision training (train --amp) is tested and
# timed; otherwise the model stack alone (-DLEANSEQ_MODELS_ONLY=ON). Benchmarks: the SAN/AAN
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
if cmake -S . -B build-gpu "${common[@]}" -DLEANSEQ_MODELS_ONLY=OFF -DLEANSEQ_CLI=OFF -DLEANSEQ_PYTHON=OFF \
    > "$OUT/configure.log" 2>&1; then
  echo "build: the training library and the model stack"
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
