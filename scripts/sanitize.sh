#!/usr/bin/env bash
# Builds leanseq and its tests with AddressSanitizer + UndefinedBehaviorSanitizer into
# ./build-asan and runs the C++ test suite there (the Python module is left out: an instrumented
# extension needs the sanitizer runtime preloaded into the interpreter). Extra arguments go to
# ctest (e.g. -R Pickle). Not part of scripts/test.sh: it takes about an hour on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DLEANSEQ_PYTHON=OFF -DLEANSEQ_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$(nproc)"
# LibTorch is not instrumented: its allocations at exit are not leanseq's leaks, and its operator
# new/delete pairs across the boundary are not mismatches ASan can judge. A quarantine of 32 MiB
# (ASan's default is 256) keeps freed memory from counting as growth in the tests that bound a
# process's peak memory.
export ASAN_OPTIONS="detect_leaks=0:alloc_dealloc_mismatch=0:abort_on_error=1:quarantine_size_mb=32${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 1800 "$@"
