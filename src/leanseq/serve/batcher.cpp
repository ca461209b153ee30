#include "leanseq/serve/batcher.h"

#include <algorithm>

#include "leanseq/core/timer.h"
#include "leanseq/decode/option_table.h"

namespace leanseq::serve {

bool Pending::wait_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return done_.wait_until(lock, deadline, [&] { return remaining_ == 0; });
}

Batcher::Batcher(decode::Translator& translator, int workers, BatchingOptions opt,
                 std::function<void(int64_t, double, int64_t)> on_batch)
    : opt_(opt), on_batch_(std::move(on_batch)) {
  for (int w = 0; w < std::max(workers, 1); ++w) workers_.emplace_back([this, &translator] { work(translator); });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  arrived_.notify_all();
  for (auto& w : workers_) w.join();
}

std::shared_ptr<Pending> Batcher::submit(const std::vector<std::string>& sentences, const decode::TranslateOptions& opt,
                                         const std::vector<decode::Constraints>* constraints) {
  auto pending = std::make_shared<Pending>(sentences.size());
  pending->remaining_ = sentences.size();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || static_cast<int64_t>(queue_.size() + sentences.size()) > opt_.queue_limit) return nullptr;
    for (size_t i = 0; i < sentences.size(); ++i) {
      queue_.push_back({sentences[i], opt, constraints ? (*constraints)[i] : decode::Constraints{}, pending, i});
    }
  }
  arrived_.notify_all();
  return pending;
}

int64_t Batcher::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(queue_.size());
}

bool Batcher::same_options(const decode::TranslateOptions& a, const decode::TranslateOptions& b) {
  for (const auto& option : decode::decoding_options()) {
    if (!option.same(a, b)) return false;
  }
  return a.search.need_attn == b.search.need_attn && a.search.constraint_order == b.search.constraint_order &&
         a.input_format == b.input_format;
}

void Batcher::work(decode::Translator& translator) {
  while (true) {
    std::vector<Item> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      arrived_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      // The oldest sentence opens the batch; others with its options join it until the batch is
      // full or the timeout passes.
      const auto deadline = std::chrono::steady_clock::now() + opt_.timeout;
      int64_t bytes = 0;
      auto take = [&] {
        for (auto it = queue_.begin(); it != queue_.end() && static_cast<int64_t>(batch.size()) < opt_.max_sentences;) {
          if (it->pending->cancelled()) {  // nobody waits for it
            finish(*it, nullptr, "cancelled");
            it = queue_.erase(it);
            continue;
          }
          const auto len = static_cast<int64_t>(it->text.size());
          const bool fits = opt_.max_bytes <= 0 || batch.empty() || bytes + len <= opt_.max_bytes;
          if ((batch.empty() || same_options(batch.front().opt, it->opt)) && fits) {
            bytes += len;
            batch.push_back(std::move(*it));
            it = queue_.erase(it);
          } else {
            ++it;
          }
        }
      };
      take();
      while (static_cast<int64_t>(batch.size()) < opt_.max_sentences && !stopping_ &&
             arrived_.wait_until(lock, deadline, [&] { return stopping_ || !queue_.empty(); })) {
        if (queue_.empty()) break;
        const size_t before = batch.size();
        take();
        if (batch.size() == before) break;  // what is queued does not fit this batch
      }
    }
    if (batch.empty()) continue;  // only cancelled sentences were queued
    std::vector<std::string> lines;
    std::vector<decode::Constraints> constraints;
    for (const auto& it : batch) {
      lines.push_back(it.text);
      constraints.push_back(it.constraints);
    }
    decode::TranslationStats stats;
    std::vector<std::vector<decode::TranslationHyp>> results;
    std::string error;
    Timer timer;
    auto opt = batch.front().opt;
    opt.search.cancelled = [&batch] {
      for (const auto& it : batch) {
        if (!it.pending->cancelled()) return false;
      }
      return true;
    };
    try {
      const bool constrained = opt.search.constraint_order != decode::ConstraintOrder::none;
      results = translator.translate(lines, opt, &stats, nullptr, constrained ? &constraints : nullptr);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (on_batch_) on_batch_(static_cast<int64_t>(batch.size()), timer.seconds(), stats.target_tokens);
    for (size_t i = 0; i < batch.size(); ++i) finish(batch[i], error.empty() ? &results[i] : nullptr, error);
  }
}

void Batcher::finish(Item& item, std::vector<decode::TranslationHyp>* result, const std::string& error) {
  auto& p = *item.pending;
  std::lock_guard<std::mutex> lock(p.mutex_);
  if (result) {
    p.results_[item.index] = std::move(*result);
  } else {
    p.error_ = error;
  }
  if (--p.remaining_ == 0) p.done_.notify_all();
}

}  // namespace leanseq::serve
