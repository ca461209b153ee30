#include "leanseq/train/signals.h"

#include <atomic>
#include <csignal>

#include "leanseq/core/signal_stack.h"

namespace leanseq::train {
namespace {
std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal.store(sig); }
}  // namespace

void install_stop_handlers() {
  use_alternate_signal_stack();  // the handler may interrupt a oneDNN product (core/signal_stack.h)
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_signal.load(); }
void clear_stop_signal() { g_signal.store(0); }

}  // namespace leanseq::train
