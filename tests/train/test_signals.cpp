// The stop handlers against the CPU's products: a SIGTERM may arrive in the middle of any of them.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "leanseq/core/threads.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/train/signals.h"

using namespace leanseq;

// oneDNN 2.6's JIT sgemm kernels point the stack register into the heap while they run, so a
// signal frame pushed on the interrupted stack corrupts the heap (core/signal_stack.h). The stop
// handler runs on a stack of its own, so thousands of SIGTERMs in the middle of a training
// product's forward and backward, and of an inference product, leave the heap and the results
// intact (with the handler on the interrupted stack, this test aborted in glibc's free within a
// second; the inference product alone, [64 x 512] by [512 x 64], did too).
TEST(StopSignals, SignalsInTheMiddleOfOneDnnProductsLeaveTheHeapIntact) {
  set_compute_threads(1);  // the products on this thread, the one the signals go to
  kernels::set_training_products(kernels::TrainingProducts::onednn);
  train::install_stop_handlers();
  stack_t ss{};
  ASSERT_EQ(sigaltstack(nullptr, &ss), 0);
  EXPECT_EQ(ss.ss_flags & SS_DISABLE, 0);
  EXPECT_GE(ss.ss_size, static_cast<size_t>(MINSIGSTKSZ));
  torch::manual_seed(1);
  // A training product's shapes (transformer_tiny's feed-forward layer on a batch of 300 tokens):
  // the forward product and both gradients' go to oneDNN.
  const auto x = torch::randn({300, 32}).requires_grad_(), w = torch::randn({64, 32}).requires_grad_(),
             b = torch::randn({64}).requires_grad_();
  const auto dy = torch::randn({300, 64});
  if (!kernels::onednn_linear(x.detach(), w.detach(), b.detach()).defined()) GTEST_SKIP() << "a build without oneDNN";
  const auto expected = torch::mm(dy.t(), x.detach());
  const auto xi = torch::randn({64, 512}), wi = torch::randn({64, 512}), bi = torch::randn({64});
  const auto expected_i = torch::addmm(bi, xi, wi.t());
  const pthread_t target = pthread_self();
  std::atomic<bool> done{false};
  std::atomic<int64_t> sent{0};
  std::thread sender([&] {
    while (!done.load()) {
      pthread_kill(target, SIGTERM);
      sent.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int64_t products = 0;
  double worst = 0;
  while (std::chrono::steady_clock::now() < until) {
    w.mutable_grad() = torch::Tensor();
    kernels::linear(x, w, b).backward(dy);
    worst = std::max(worst, (w.grad() - expected).abs().max().item<double>());
    torch::NoGradGuard inference;
    worst = std::max(worst, (kernels::onednn_linear(xi, wi, bi) - expected_i).abs().max().item<double>());
    ++products;
  }
  done.store(true);
  sender.join();
  EXPECT_EQ(train::stop_signal(), SIGTERM);
  train::clear_stop_signal();
  EXPECT_GT(sent.load(), 1000);
  EXPECT_GT(products, 100);
  EXPECT_LT(worst, 1e-3);
}
