#include "leanseq/eval/attention_similarity.h"

#include <cmath>

namespace leanseq::eval {

torch::Tensor jensen_shannon(const torch::Tensor& p, const torch::Tensor& q) {
  auto pd = p.to(torch::kDouble), qd = q.to(torch::kDouble);
  auto m = (pd + qd) / 2;
  // sum p log p - p log m, with 0 log 0 = 0.
  auto kl = [&](const torch::Tensor& x) { return (torch::xlogy(x, x) - torch::xlogy(x, m)).sum(-1); };
  return ((kl(pd) + kl(qd)) / (2 * std::log(2.0))).clamp(0, 1);
}

LayerSimilarity::LayerSimilarity(size_t layers) : sum_(layers, std::vector<double>(layers, 0.0)) {}

void LayerSimilarity::add(const std::vector<torch::Tensor>& maps, const torch::Tensor& valid) {
  const size_t L = sum_.size();
  TORCH_CHECK(maps.size() == L, "LayerSimilarity: ", maps.size(), " maps for ", L, " layers");
  if (L == 0) return;
  const int64_t heads = maps[0].size(1);
  auto w = valid.to(torch::kDouble).unsqueeze(1);  // [B, 1, T]: weight of each query position
  positions_ += heads * valid.sum().item<int64_t>();
  for (size_t i = 0; i < L; ++i) {
    for (size_t j = i + 1; j < L; ++j) {
      double sim = ((1 - jensen_shannon(maps[i], maps[j])) * w).sum().item<double>();
      sum_[i][j] += sim;
      sum_[j][i] += sim;
    }
  }
}

Matrix LayerSimilarity::matrix() const {
  Matrix m = sum_;
  for (size_t i = 0; i < m.size(); ++i) {
    for (size_t j = 0; j < m.size(); ++j) m[i][j] = i == j ? 1.0 : (positions_ ? m[i][j] / positions_ : 0.0);
  }
  return m;
}

std::vector<std::pair<int64_t, int64_t>> propose_blocks(const Matrix& similarity, double theta) {
  std::vector<std::pair<int64_t, int64_t>> blocks;
  const auto L = static_cast<int64_t>(similarity.size());
  for (int64_t a = 0; a < L;) {
    int64_t b = a;
    while (b + 1 < L && similarity[a][b + 1] >= theta) ++b;
    blocks.emplace_back(a, b);
    a = b + 1;
  }
  return blocks;
}

}  // namespace leanseq::eval
