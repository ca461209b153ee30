#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, CMake, ninja, nvcc and Python torch (whose wheel holds a CUDA
# LibTorch): builds the model stack with the CUDA kernels (-DLEANSEQ_MODELS_ONLY=ON, which needs
# neither ICU nor cairo), runs its tests (the CUDA kernel checks included) and the SAN/AAN
# decoding benchmark on the GPU (batch 64 at output lengths 30 and 100, batch 1 at 30; with the
# operator counts of --count-ops: all, those that launch a kernel, the matrix products). JSON results go to $OUT
# (default build-gpu/out), with float16/bfloat16 compute types against float32. --bench-only skips
# the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build-gpu/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PATH=/usr/local/cuda/bin:$PATH
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLEANSEQ_MODELS_ONLY=ON -DLEANSEQ_CUDA=ON \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log"
cmake --build build-gpu -j "$(nproc)" > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
if [ "${1:-}" != --bench-only ]; then
  (cd build-gpu && ctest -j 8 --output-on-failure > "$OUT/ctest.log" 2>&1) || true
  grep -E "tests passed|\(Failed\)" "$OUT/ctest.log"
  build-gpu/tests/test_kernels --gtest_filter='*Cuda*' 2>&1 | grep -E "OK|FAILED|SKIPPED" | head
  # Decoding on the GPU scores the CPU's hypotheses alike (translate --device cuda runs this search).
  build-gpu/tests/test_decode --gtest_filter='*Cuda*' 2>&1 | grep -E "OK|FAILED|SKIPPED|Failure" | head
fi
A=transformer_iwslt_de_en
archs=$A,${A}_san,${A}_aan,${A}_san_aan,${A}_san_aan:decoder.average_attention_ffn=false
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

