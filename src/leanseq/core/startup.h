// What every leanseq program does first: have the libraries' idle-thread settings in the
// environment before they initialise, then in main(), before any tensor work, run the float32
// products on the best BLAS kernels for this CPU (core/blas.h) and keep freed memory for reuse
// (core/memory.h). Included by the programs' main() files only.
#pragma once

#include "leanseq/core/blas.h"
#include "leanseq/core/memory.h"

namespace leanseq {

namespace startup_detail {
// A program's ELF pre-initialisation array runs once its shared libraries are loaded, before their
// initialisers: a restart from there skips LibTorch's (most of a start-up's half second). Shared
// libraries have no such array (the Python module sets the variables from Python instead).
inline void before_the_libraries(int, char** argv, char** envp) { restart_with_thread_settings(argv, envp); }
[[gnu::used, gnu::section(".preinit_array")]] static void (*run_before_the_libraries)(int, char**, char**) =
    &before_the_libraries;
}  // namespace startup_detail

inline void start_program(char** argv) {
  ensure_fast_blas(argv);
  retain_freed_memory();
}

}  // namespace leanseq
