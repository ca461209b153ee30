#include "leanseq/runtime/translator_pool.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>

#include "leanseq/core/error.h"
#include "leanseq/core/threads.h"

namespace leanseq::runtime {

TranslatorPool::TranslatorPool(decode::Translator& translator, int64_t workers, int64_t intra_threads)
    : translator_(translator) {
  if (workers < 1 || workers > max_compute_threads()) {
    throw ConfigError(std::to_string(workers) + " is not between 1 and " +
                      std::to_string(max_compute_threads()));
  }
  // ATen's and OpenBLAS's thread counts are the process's: every worker gets the same share (one
  // worker with 0 keeps the process's setting).
  const int64_t intra = intra_threads > 0 ? intra_threads : std::max<int64_t>(1, compute_threads() / workers);
  if (intra_threads > 0 || workers > 1) set_compute_threads(intra);  // ConfigError past its bound
  intra_threads_ = static_cast<int>(intra);
  for (int64_t w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
}

TranslatorPool::~TranslatorPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void TranslatorPool::work() {
  at::init_num_threads();  // this thread's OpenMP team size, from the process's setting
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

std::vector<std::vector<decode::TranslationHyp>> TranslatorPool::translate(const std::vector<std::string>& lines,
                                                                           const decode::TranslateOptions& opt,
                                                                           decode::TranslationStats* stats,
                                                                           bool in_order,
                                                                           const std::vector<decode::Constraints>* constraints,
                                                                           const std::vector<std::string>* prefixes) {
  const auto start = std::chrono::steady_clock::now();
  // Parts of at most one batch, spread over the workers; one part when asked. A part takes lines
  // of like length (their bytes), as one translator's batches do, not neighbours in the input.
  const size_t n = lines.size();
  const size_t per_worker = (n + threads_.size() - 1) / threads_.size();
  const size_t part = in_order ? std::max<size_t>(n, 1)
                              : std::max<size_t>(1, std::min<size_t>(per_worker, std::max<int64_t>(opt.max_sentences, 1)));
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  if (!in_order && n > part) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lines[a].size() < lines[b].size(); });
  }
  std::vector<std::vector<decode::TranslationHyp>> out(n);
  const size_t parts = (n + part - 1) / part;
  std::vector<decode::TranslationStats> part_stats(parts);
  std::vector<std::future<void>> done;
  // The longest parts are queued first: the workers that finish early take the short ones, and
  // the call does not wait on one worker decoding the longest lines while the others are idle.
  // Which lines make each part does not change, nor does any translation.
  for (size_t k = parts; k-- > 0;) {
    const size_t begin = k * part, end = std::min(n, begin + part);
    auto task = std::make_shared<std::packaged_task<void()>>([&, begin, end, k] {
      std::vector<std::string> these, their_prefixes;
      std::vector<decode::Constraints> their_constraints;
      for (size_t j = begin; j < end; ++j) {
        these.push_back(lines[order[j]]);
        if (prefixes) their_prefixes.push_back((*prefixes)[order[j]]);
        if (constraints) their_constraints.push_back((*constraints)[order[j]]);
      }
      auto hyps = translator_.translate(these, opt, &part_stats[k], prefixes ? &their_prefixes : nullptr,
                                        constraints ? &their_constraints : nullptr);
      for (size_t j = begin; j < end; ++j) out[order[j]] = std::move(hyps[j - begin]);
    });
    done.push_back(task->get_future());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.emplace_back([task] { (*task)(); });
    }
    ready_.notify_one();
  }
  // Every part finishes (they refer to this frame) before the first error is thrown.
  std::exception_ptr error;
  for (auto& f : done) {
    try {
      f.get();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  if (stats) {  // the parts ran side by side: the call's time is theirs
    for (const auto& s : part_stats) {
      stats->sentences += s.sentences, stats->target_tokens += s.target_tokens, stats->truncated += s.truncated;
    }
    stats->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return out;
}

}  // namespace leanseq::runtime
