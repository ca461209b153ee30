// Process-wide allocator policy for tensor work on the CPU.
#pragma once
#include <cstdint>
#include <string>

namespace leanseq {

// Makes glibc malloc serve every allocation from its heap and keep freed memory for reuse,
// instead of mmap()ing each large tensor afresh and unmapping it on free. Training and beam
// search allocate and free the same large buffers at every step; with the default policy each
// of them pays its page faults again (measured: a fresh 64 MiB buffer costs ~165 ms of faults
// on the 2-core reference machine, a reused one ~2 ms). Call once, before any tensor work.
// Where a program allocates through jemalloc (CMake's LEANSEQ_JEMALLOC), jemalloc keeps freed
// memory the same way, in transparent huge pages: this file sets its malloc_conf
// ("dirty_decay_ms:-1,lg_extent_max_active_fit:30,thp:always,metadata_thp:always": kept memory
// serves requests of any size, so that it bounds what the process maps), whose settings MALLOC_CONF in the
// environment overrides one by one (e.g. MALLOC_CONF=dirty_decay_ms:10000 hands freed pages back
// after ten seconds, MALLOC_CONF=thp:default leaves pages to the kernel's policy).
void retain_freed_memory();

// Hands the freed memory retain_freed_memory keeps back to the kernel now (jemalloc's arenas
// purged, or glibc's heap trimmed): after a one-off peak such as reading a checkpoint while the
// process serves, so that the peak does not stay resident.
void return_freed_memory();

// "allocator: jemalloc 5.3.0 (freed memory kept for reuse, huge pages)" or "allocator: the C library's malloc":
// the malloc this process runs on, for the programs' start-up log.
std::string allocator_summary();

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
