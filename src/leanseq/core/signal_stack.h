// An alternate signal stack for the calling thread, for every handler installed with SA_ONSTACK
// (leanseq's stop handlers; Python's, which CPython installs with that flag).
//
// A signal interrupts whatever the thread is doing, and oneDNN 2.6's JIT sgemm kernels (Debian 12's
// libdnnl; oneDNN issue 4845, fixed in 3.11) point the stack register into the heap while they
// run: a signal frame pushed on the interrupted stack overwrites heap memory, and glibc aborts in
// a later free ("corrupted size vs. prev_size"). leanseq's products, inference's and training's,
// go through that sgemm, so a thread that computes and takes signals runs their handlers here.
#pragma once

namespace leanseq {

// Gives the calling thread its own signal stack, sized for the whole extended state of this CPU
// (AVX-512 registers, AMX tiles), unless it has one of that size already (Python's faulthandler
// sets one). The memory stays until the process ends.
void use_alternate_signal_stack();

}  // namespace leanseq
