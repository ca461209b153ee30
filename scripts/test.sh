#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the whole test suite: the fuzz targets for
# a short time each, then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# The readers of untrusted input, fuzzed briefly from their corpora (docs/security.md).
LEANSEQ_FUZZ_SEED="${LEANSEQ_FUZZ_SEED:-1}" bash scripts/fuzz.sh all "${LEANSEQ_FUZZ_SECONDS:-20}"
ctest --test-dir build --output-on-failure -j "$(nproc)"
