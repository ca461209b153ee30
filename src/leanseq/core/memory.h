// Process-wide allocator policy for tensor work on the CPU.
#pragma once

namespace leanseq {

// Makes glibc malloc serve every allocation from its heap and keep freed memory for reuse,
// instead of mmap()ing each large tensor afresh and unmapping it on free. Training and beam
// search allocate and free the same large buffers at every step; with the default policy each
// of them pays its page faults again (measured: a fresh 64 MiB buffer costs ~165 ms of faults
// on the 2-core reference machine, a reused one ~2 ms). Call once, before any tensor work.
void retain_freed_memory();

}  // namespace leanseq
