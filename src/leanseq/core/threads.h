// Process-wide thread policy for tensor work on the CPU.
#pragma once
#include <cstdint>

namespace leanseq {

// Sets how many threads CPU tensor work may use: ATen's intra-op pool and, when the BLAS that
// LibTorch calls is OpenBLAS, OpenBLAS's own pool too. OpenBLAS does not follow ATen's setting,
// so without this a "one thread" run still spreads every matrix product over all cores (and its
// idle workers spin in sched_yield beside the main thread). n <= 0 (the `threads: 0` of the
// configs and command lines) leaves both pools at their defaults. ConfigError for n < 0 and for n
// above max_compute_threads().
// Also sets compute_threads().
void set_compute_threads(int64_t n);
// The most threads a setting may ask for: 4 x the CPUs this process may run on (at least 4).
int max_compute_threads();

// The help text of every threads option and config key.
inline constexpr const char* kComputeThreadsHelp =
    "threads for CPU tensor work: ATen's intra-op pool and OpenBLAS's (0: their defaults)";

// How many threads leanseq's own CPU kernels (kernels/parallel.h) may use: the last n > 0 given to
// set_compute_threads, else OMP_NUM_THREADS when set (the data-parallel launcher sets it for each
// worker), else the hardware's thread count. ATen's default can be lower than the last (it counts
// physical cores), which is why the kernels do not simply ask ATen.
int compute_threads();

}  // namespace leanseq
