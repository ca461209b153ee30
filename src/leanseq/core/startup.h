// What every leanseq program does first in main(), before any tensor work: run the float32
// products on the best BLAS kernels for this CPU (core/blas.h; this may restart the program once)
// and keep freed memory for reuse (core/memory.h).
#pragma once

#include "leanseq/core/blas.h"
#include "leanseq/core/memory.h"

namespace leanseq {

inline void start_program(char** argv) {
  ensure_fast_blas(argv);
  retain_freed_memory();
}

}  // namespace leanseq
