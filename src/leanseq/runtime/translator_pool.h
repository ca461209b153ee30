// Several translations at once on one loaded model, as CTranslate2's inter_threads: `workers`
// threads decode with the same weights (one copy), each with `intra_threads` for its own tensor
// work. A call's lines, ordered by length, are cut into parts that the workers take from one
// queue, so that concurrent callers share them too; results come back in input order and equal one
// thread's (batching never changes a translation).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "leanseq/decode/translator.h"

namespace leanseq::runtime {

class TranslatorPool {
 public:
  // `translator` must outlive the pool. ConfigError for workers outside 1..max_compute_threads()
  // (the message without the option's name, which the caller adds).
  // intra_threads 0: compute threads / workers (at least 1).
  TranslatorPool(decode::Translator& translator, int64_t workers, int64_t intra_threads = 0);
  ~TranslatorPool();  // finishes what is queued
  TranslatorPool(const TranslatorPool&) = delete;
  TranslatorPool& operator=(const TranslatorPool&) = delete;

  // n-best translations of each line, in input order. `in_order`: all lines as one part on one
  // worker (a seeded sampler draws its numbers as one thread would). `prefixes` and `constraints`:
  // one per line, as Translator::translate takes them.
  std::vector<std::vector<decode::TranslationHyp>> translate(const std::vector<std::string>& lines,
                                                             const decode::TranslateOptions& opt,
                                                             decode::TranslationStats* stats = nullptr,
                                                             bool in_order = false,
                                                             const std::vector<decode::Constraints>* constraints = nullptr,
                                                             const std::vector<std::string>* prefixes = nullptr);
  int workers() const { return static_cast<int>(threads_.size()); }
  int intra_threads() const { return intra_threads_; }

 private:
  void work();
  decode::Translator& translator_;
  int intra_threads_ = 1;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace leanseq::runtime
