// How alike the attention of different layers is (the sharing policy of SAN, Xiao et al. 2019):
// similarity = 1 - Jensen-Shannon divergence (base 2, so in [0, 1]) between two layers'
// distributions, averaged over heads and query positions; and the greedy grouping of adjacent
// layers into blocks that may share one distribution.
#pragma once
#include <torch/torch.h>

#include <utility>
#include <vector>

namespace leanseq::eval {

// Jensen-Shannon divergence in bits between the distributions along the last dimension of p and
// q (same shape [..., S]); returns [...]. Zero for identical distributions, at most 1.
torch::Tensor jensen_shannon(const torch::Tensor& p, const torch::Tensor& q);

using Matrix = std::vector<std::vector<double>>;

// Accumulates the mean similarity of every pair of layers over batches.
class LayerSimilarity {
 public:
  explicit LayerSimilarity(size_t layers);
  // maps: one distribution [B, H, T, S] per layer; valid: [B, T] bool, the query positions that
  // count (not padding).
  void add(const std::vector<torch::Tensor>& maps, const torch::Tensor& valid);
  Matrix matrix() const;  // layers x layers, symmetric, 1 on the diagonal
  int64_t positions() const { return positions_; }  // query positions x heads seen

 private:
  Matrix sum_;
  int64_t positions_ = 0;
};

// Blocks of adjacent layers, each [first, last]: a block starting at layer a takes in a+1, a+2,
// ... while the similarity of the next layer to layer a (whose distribution it would reuse) is at
// least theta.
std::vector<std::pair<int64_t, int64_t>> propose_blocks(const Matrix& similarity, double theta);

}  // namespace leanseq::eval
