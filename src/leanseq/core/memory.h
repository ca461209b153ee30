// Process-wide allocator policy for tensor work on the CPU.
#pragma once
#include <cstdint>

namespace leanseq {

// Makes glibc malloc serve every allocation from its heap and keep freed memory for reuse,
// instead of mmap()ing each large tensor afresh and unmapping it on free. Training and beam
// search allocate and free the same large buffers at every step; with the default policy each
// of them pays its page faults again (measured: a fresh 64 MiB buffer costs ~165 ms of faults
// on the 2-core reference machine, a reused one ~2 ms). Call once, before any tensor work.
void retain_freed_memory();

}  // namespace leanseq

namespace leanseq {

// Counts the bytes of CPU tensor storage allocated from now on, by wrapping the allocator ATen
// uses for CPU tensors: what is live now and the peak since the last reset. For benchmarks that
// compare the activation memory of two training modes in one process (peak RSS only grows, and
// retain_freed_memory keeps freed blocks in the heap). Memory that libraries allocate beside
// tensors (oneDNN scratch, BLAS buffers) is not counted.
void count_cpu_tensor_memory();
int64_t cpu_tensor_bytes();
int64_t cpu_tensor_peak_bytes();
void reset_cpu_tensor_peak();  // the peak becomes what is live now

}  // namespace leanseq
