#include "leanseq/core/signal_stack.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>

namespace leanseq {

void use_alternate_signal_stack() {
  // The kernel's minimum holds one signal frame of this CPU's state; a handler needs room of its own.
  const long minimum = sysconf(_SC_MINSIGSTKSZ);
  const size_t enough = static_cast<size_t>(std::max<long>(minimum, 16 * 1024));
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE) && current.ss_size >= enough) return;
  stack_t ss{};
  ss.ss_size = 4 * enough;
  ss.ss_sp = new char[ss.ss_size];  // never freed: a signal may come until the thread ends
  sigaltstack(&ss, nullptr);
}

}  // namespace leanseq
