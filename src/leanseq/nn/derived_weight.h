// A tensor computed from parameters: ConvS2S's weight-normalised weights, the AAN layer's folded
// products. While no gradient is recorded (decoding, validation) it is computed once per storage
// and version of the parameters it comes from and kept; otherwise on every call, so that the
// graph reaches the parameters. Threads that decode with one model share it (under a lock).
#pragma once
#include <torch/torch.h>

#include <initializer_list>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace leanseq::nn {

class DerivedWeight {
 public:
  template <class Compute>
  torch::Tensor get(std::initializer_list<torch::Tensor> from, Compute&& compute) {
    if (torch::GradMode::is_enabled()) return compute();
    std::vector<std::pair<const void*, int64_t>> now;
    for (const auto& p : from) now.emplace_back(p.data_ptr(), p._version());
    std::lock_guard<std::mutex> lock(*mutex_);
    if (!value_.defined() || now != seen_) {
      value_ = compute().contiguous();
      seen_ = std::move(now);
    }
    return value_;
  }

 private:
  std::shared_ptr<std::mutex> mutex_ = std::make_shared<std::mutex>();
  torch::Tensor value_;
  std::vector<std::pair<const void*, int64_t>> seen_;  // each parameter's storage and version
};

}  // namespace leanseq::nn
