#include "leanseq/core/memory.h"

#include <malloc.h>

namespace leanseq {

void retain_freed_memory() {
  mallopt(M_MMAP_MAX, 0);                // no per-allocation mmap: large blocks come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);    // do not hand freed memory back to the kernel
  mallopt(M_TOP_PAD, 64 << 20);          // grow the heap in 64 MiB steps
}

}  // namespace leanseq
