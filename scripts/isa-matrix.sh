#!/usr/bin/env bash
# Runs the test suite once per instruction set that oneDNN and ATen may pick, each capped with
# ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY and OPENBLAS_CORETYPE, so that the claims of equal bits (batching, streaming,
# serving and ensembles of one model never change a translation) are checked on the kernels an
# AVX2-only, an AVX-512 and a VNNI machine would run, wherever this runs. A setting above what this
# CPU has is skipped and said so.
#   scripts/isa-matrix.sh                 the whole suite under each setting (after scripts/build.sh)
#   scripts/isa-matrix.sh -R 'BeamSearch' ctest's arguments instead: a part of it
# Prints one line per setting and exits non-zero when a setting fails; the failing tests' output
# is in build/isa-matrix/<setting>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/leanseq ] || bash scripts/build.sh
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
# name | oneDNN's cap | ATen's cap | OpenBLAS's kernels | the CPU flags it needs
settings=(
  "avx2|AVX2|avx2|Haswell|avx2 fma"
  "avx2-aten-default|AVX2|default|Haswell|avx2 fma"
  "avx512|AVX512_CORE|avx512|SkylakeX|avx512f avx512bw avx512vl avx512dq"
  "avx512-vnni|AVX512_CORE_VNNI|avx512|SkylakeX|avx512f avx512bw avx512vl avx512dq avx512_vnni"
  "native|||||"
)
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-j "$(nproc)")
mkdir -p build/isa-matrix
failed=0
for s in "${settings[@]}"; do
  IFS='|' read -r name onednn aten openblas needs <<<"$s"
  # shellcheck disable=SC2086
  if [ -n "$needs" ] && ! has $needs; then
    echo "$name: skipped (this CPU lacks one of: $needs)"
    continue
  fi
  env_args=()
  [ -n "$onednn" ] && env_args+=("ONEDNN_MAX_CPU_ISA=$onednn")
  [ -n "$aten" ] && env_args+=("ATEN_CPU_CAPABILITY=$aten")
  [ -n "$openblas" ] && env_args+=("OPENBLAS_CORETYPE=$openblas")
  start=$(date +%s)
  if env "${env_args[@]}" ctest --test-dir build --output-on-failure "${args[@]}" >"build/isa-matrix/$name.log" 2>&1; then
    result="passed"
  else
    result="FAILED"
    failed=1
  fi
  summary=$(grep -E "tests passed|tests failed" "build/isa-matrix/$name.log" | tail -1)
  echo "$name (${env_args[*]:-no caps}): $result, $summary, $(( $(date +%s) - start )) s"
done
exit $failed
