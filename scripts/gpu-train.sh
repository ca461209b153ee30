#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, CMake, ninja, nvcc and Python torch (whose wheel holds a CUDA
# LibTorch): builds the training library and leanseq-bench with -DLEANSEQ_CUDA=ON -DLEANSEQ_CLI=OFF
# (no cairo needed) and trains a preset (default transformer_small) on a prepared corpus (default
# runs/m30k, written by `leanseq prepare`) on the GPU, for a number of updates, three rounds each:
# as one process, and as the one rank of an NCCL process group (WORLD_SIZE=1). JSON goes to $OUT
# (default build-gpu-train/out).
# ICU: on a machine without its headers (libicu-dev), set ICU_HEADERS to a copy of another
# machine's include/unicode; its symbol-version suffix is matched to the libicuuc found here.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-runs/m30k}
ARCH=${ARCH:-transformer_small}
UPDATES=${UPDATES:-300}
OUT=${OUT:-build-gpu-train/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PATH=/usr/local/cuda/bin:$PATH
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
icu=()
if [ ! -f /usr/include/unicode/uchar.h ]; then
  [ -n "${ICU_HEADERS:-}" ] || { echo "no ICU headers here: set ICU_HEADERS to a copy of include/unicode" >&2; exit 2; }
  lib=$(ls /usr/lib/x86_64-linux-gnu/libicuuc.so.[0-9]* | grep -E 'so\.[0-9]+$' | head -1)
  version=${lib##*.so.}
  root=$PWD/build-gpu-train/icu
  rm -rf "$root" && mkdir -p "$root/include" "$root/lib"
  cp -r "$ICU_HEADERS" "$root/include/unicode"
  sed -i -E "s/^#define U_ICU_VERSION_SUFFIX _[0-9]+/#define U_ICU_VERSION_SUFFIX _$version/" "$root/include/unicode/uvernum.h"
  ln -sf "$lib" "$root/lib/libicuuc.so"
  icu=(-DICU_ROOT="$root")
fi
cmake -S . -B build-gpu-train -G Ninja -DCMAKE_BUILD_TYPE=Release -DLEANSEQ_CUDA=ON -DLEANSEQ_CLI=OFF \
  -DLEANSEQ_BUILD_TESTS=OFF -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CUDA_ARCHITECTURES=90 "${icu[@]}" > "$OUT/configure.log" 2>&1 ||
  { tail -30 "$OUT/configure.log"; exit 1; }
grep -E "WARNING|Gloo|nccl" -A2 "$OUT/configure.log" || true
cmake --build build-gpu-train -j "$(nproc)" --target leanseq-bench > "$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -60; exit 1; }
# Each round is its own process, as a user runs it.
common=(--data "$DATA" --arch "$ARCH" --train-updates "$UPDATES" --rounds 1 --max-tokens 4096 --no-translate
        --set device=cuda --set log.format=text)
for round in 1 2 3; do
  rm -rf build-gpu-train/one build-gpu-train/nccl
  build-gpu-train/bench/leanseq-bench "${common[@]}" --save-dir build-gpu-train/one > "$OUT/train_cuda_$round.json" \
    2> "$OUT/train_cuda_$round.err" || { tail -20 "$OUT/train_cuda_$round.err"; exit 1; }
  WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29533 + round)) \
    build-gpu-train/bench/leanseq-bench "${common[@]}" --save-dir build-gpu-train/nccl > "$OUT/train_cuda_nccl_$round.json" \
    2> "$OUT/train_cuda_nccl_$round.err" || { tail -20 "$OUT/train_cuda_nccl_$round.err"; exit 1; }
done
grep -h "distributed:" "$OUT/train_cuda_nccl_1.err" | head -1
python3 - "$OUT" <<'PY'
import json, statistics, sys
for name in ("train_cuda", "train_cuda_nccl"):
    runs = [json.load(open(f"{sys.argv[1]}/{name}_{r}.json"))["contenders"][0]["runs"][0] for r in (1, 2, 3)]
    tps = [r["train_target_tokens_per_second"] for r in runs]
    comm = [r["train_allreduce_seconds"] / r["train_updates"] * 1000 for r in runs]
    print(name, "target tokens/s per round", [round(x) for x in tps], "median", round(statistics.median(tps)),
          "| all-reduce ms/update median", round(statistics.median(comm), 2))
PY
