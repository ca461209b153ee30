// Dynamic batching for the server: requests put their sentences in one queue; decoding workers (all
// with one translator, one copy of the model) take the oldest sentence and, for up to
// `timeout` more, every queued sentence with the same decoding options, up to a batch of
// `max_sentences` sentences and `max_bytes` bytes of source text, translate them in one call
// (which sorts them by length) and hand each request its results. A full queue refuses new work
// instead of growing. Sentences of a cancelled request are not decoded.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "leanseq/decode/translator.h"

namespace leanseq::serve {

struct BatchingOptions {
  int64_t max_sentences = 64;
  int64_t max_bytes = 0;  // bytes of source text (UTF-8) per batch (0: no limit)
  std::chrono::milliseconds timeout{5};
  int64_t queue_limit = 4096;  // sentences waiting at most
};

// What one request waits for.
class Pending {
 public:
  explicit Pending(size_t n) : results_(n) {}
  // Waits until every sentence is translated or `deadline` passes; false on the deadline.
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  const std::vector<std::vector<decode::TranslationHyp>>& results() const { return results_; }
  const std::string& error() const { return error_; }
  // Nobody waits any more (the request timed out): its queued sentences are dropped, and a batch
  // whose sentences are all cancelled stops decoding.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class Batcher;
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<std::vector<decode::TranslationHyp>> results_;
  size_t remaining_ = 0;
  std::string error_;
};

class Batcher {
 public:
  // `workers` threads decode with `translator` (one copy of the weights; it must outlive the
  // batcher). `on_batch(sentences, seconds, target_tokens)` reports each batch (for metrics).
  Batcher(decode::Translator& translator, int workers, BatchingOptions opt,
          std::function<void(int64_t, double, int64_t)> on_batch = {});
  ~Batcher();  // finishes what is queued, then stops the workers
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues the sentences (with `constraints`, one per sentence, when opt is constrained); nullptr
  // when the queue has no room for them.
  std::shared_ptr<Pending> submit(const std::vector<std::string>& sentences, const decode::TranslateOptions& opt,
                                  const std::vector<decode::Constraints>* constraints = nullptr);
  int64_t queued() const;

 private:
  struct Item {
    std::string text;
    decode::TranslateOptions opt;
    decode::Constraints constraints;
    std::shared_ptr<Pending> pending;
    size_t index = 0;
  };
  void work(decode::Translator& translator);
  // Hands item its result (or `error` when result is null) and wakes its request when it was the last.
  static void finish(Item& item, std::vector<decode::TranslationHyp>* result, const std::string& error);
  static bool same_options(const decode::TranslateOptions& a, const decode::TranslateOptions& b);

  BatchingOptions opt_;
  std::function<void(int64_t, double, int64_t)> on_batch_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace leanseq::serve
