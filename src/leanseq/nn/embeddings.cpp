#include "leanseq/nn/embeddings.h"

#include <cmath>

namespace leanseq::nn {

torch::Tensor make_positions(const torch::Tensor& tokens, int64_t padding_idx) {
  auto mask = tokens.ne(padding_idx).to(torch::kLong);
  return torch::cumsum(mask, 1) * mask + padding_idx;
}

torch::Tensor sinusoidal_table(int64_t num, int64_t dim, int64_t padding_idx) {
  int64_t half = dim / 2;
  double step = std::log(10000.0) / static_cast<double>(half - 1);
  auto freqs = torch::exp(torch::arange(half, torch::kFloat) * static_cast<float>(-step));
  auto args = torch::arange(num, torch::kFloat).unsqueeze(1) * freqs.unsqueeze(0);
  auto table = torch::cat({torch::sin(args), torch::cos(args)}, 1).view({num, -1});
  if (dim % 2 == 1) table = torch::cat({table, torch::zeros({num, 1})}, 1);
  if (padding_idx >= 0 && padding_idx < num) table[padding_idx].zero_();
  return table;
}

PositionalEmbeddingImpl::PositionalEmbeddingImpl(int64_t dim, int64_t padding_idx, int64_t max_positions,
                                                 bool learned)
    : dim_(dim), padding_idx_(padding_idx), learned_(learned) {
  if (learned) {
    weight = register_parameter("weight", torch::randn({max_positions + padding_idx + 1, dim}) *
                                              std::pow(static_cast<double>(dim), -0.5));
    torch::NoGradGuard g;
    weight[padding_idx].zero_();
  } else {
    table_ = sinusoidal_table(max_positions + padding_idx + 1, dim, padding_idx);
  }
}

torch::Tensor PositionalEmbeddingImpl::table(int64_t rows, const torch::Device& device) {
  if (learned_) return weight;
  std::lock_guard<std::mutex> lock(*table_mutex_);
  if (rows > table_.size(0)) table_ = sinusoidal_table(rows, dim_, padding_idx_);
  if (table_.device() != device) table_ = table_.to(device);
  return table_;
}

torch::Tensor PositionalEmbeddingImpl::lookup(const torch::Tensor& positions) {
  if (learned_) return torch::embedding(weight, positions, padding_idx_);
  const int64_t rows = positions.numel() ? positions.max().item<int64_t>() + 1 : 0;
  return table(rows, positions.device())
      .index_select(0, positions.reshape(-1))
      .view({positions.size(0), positions.size(1), dim_});
}

torch::Tensor PositionalEmbeddingImpl::forward(const torch::Tensor& tokens) {
  return lookup(make_positions(tokens, padding_idx_));
}

torch::Tensor PositionalEmbeddingImpl::at_steps(int64_t start, int64_t n, int64_t batch, const torch::Device& device) {
  const int64_t first = padding_idx_ + start + 1;
  const auto t = table(first + n, device);
  TORCH_CHECK(first + n <= t.size(0), "position ", first + n - 1 - padding_idx_, " is beyond the ",
              t.size(0) - padding_idx_ - 1, " learned positions");
  return t.narrow(0, first, n).unsqueeze(0).expand({batch, n, dim_});
}

torch::nn::Embedding make_embedding(int64_t num, int64_t dim, int64_t padding_idx) {
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(num, dim).padding_idx(padding_idx));
  torch::NoGradGuard g;
  e->weight.normal_(0, std::pow(static_cast<double>(dim), -0.5));
  e->weight[padding_idx].zero_();
  return e;
}

torch::Tensor register_output_projection(torch::nn::Module& owner, const torch::nn::Embedding& embed, bool tied,
                                         int64_t vocab, int64_t dim) {
  auto projection = owner.register_module("output_projection", std::make_shared<torch::nn::Module>());
  if (tied) return projection->register_parameter("weight", embed->weight);
  return projection->register_parameter("weight", torch::randn({vocab, dim}) * std::pow(static_cast<double>(dim), -0.5));
}

}  // namespace leanseq::nn
