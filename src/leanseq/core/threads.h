// Process-wide thread policy for tensor work on the CPU.
#pragma once

namespace leanseq {

// Sets how many threads CPU tensor work may use: ATen's intra-op pool and, when the BLAS that
// LibTorch calls is OpenBLAS, OpenBLAS's own pool too. OpenBLAS does not follow ATen's setting,
// so without this a "one thread" run still spreads every matrix product over all cores (and its
// idle workers spin in sched_yield beside the main thread). n <= 0 (the `threads: 0` of the
// configs and command lines) leaves both pools at their defaults.
void set_compute_threads(int n);

}  // namespace leanseq
