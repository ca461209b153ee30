// The A2 double-attention block (Chen et al., "A2-Nets: Double Attention Networks", NeurIPS 2018)
// over sequences. With A = phi(X) ([B, T, m] features), Bg = theta(X) and V = rho(X) ([B, T, n]):
//   gather:     G = A^T softmax_over_positions(Bg)      [B, m, n]   (n global descriptors)
//   distribute: Z_t = G softmax_over_descriptors(V_t)   [B, T, m]   (each position picks a mix)
//   out = X + proj(Z)        (norm none; pre: the maps read LayerNorm(X); post: LayerNorm(X + proj(Z)),
//                             the conventions of a pre-norm or post-norm host network)
// The distribute softmax is over the n descriptors at each position (normalising it over
// positions is a common re-implementation bug). Cost: linear in the length.
//
// The causal form gathers, for position t, only positions s <= t, through running sums: its
// step-by-step decoding carries (running max, numerator [B, m, n], denominator [B, n]) in a
// DoubleAttentionCache. Its full (training) pass over a sequence goes in chunks of
// causal_chunk() positions: a masked product inside a chunk, running sums across chunks, so its
// time and memory are linear in the length (docs/a2.md has the measurements).
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/incremental_state.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

enum class BlockNorm { none, pre, post };

class DoubleAttentionImpl : public torch::nn::Module {
 public:
  // dim: channels of X; m: gathered feature size; n: number of descriptors.
  DoubleAttentionImpl(int64_t dim, int64_t m, int64_t n, bool causal, double dropout, BlockNorm norm = BlockNorm::none);
  // x: [B, T, C]; padding_mask [B, T] bool (true at pads) or undefined. Pads neither give to the
  // gather nor change (their output is x).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding_mask = {});
  // Causal only: n new positions x [B, n, C] after those summed in `cache` (updated); positions
  // where token_padding [B, n] is true add nothing.
  torch::Tensor step(const torch::Tensor& x, DoubleAttentionCache& cache, const torch::Tensor& token_padding = {});
  // The distribution over descriptors at each position [B, T, n] (for tests and analysis).
  torch::Tensor distribute_weights(const torch::Tensor& x);
  // Positions per chunk of the causal full pass over a sequence; 0: the whole sequence in one
  // masked [T, T] product (quadratic; the reference the chunked form is tested against).
  static constexpr int64_t kDefaultCausalChunk = 64;
  int64_t causal_chunk() const { return causal_chunk_; }
  void set_causal_chunk(int64_t chunk) { causal_chunk_ = chunk; }

  // The 2D form over a channels-last grid x [B, H, W, C] (Pervasive Attention's target x source
  // grid): every cell gathers from the whole grid or, with causal_rows, from the rows <= its own
  // (the target axis of a decoder grid). Cells where cell_mask (broadcastable to [B, H, W], true =
  // excluded; may be undefined) is true neither give to the gather nor change.
  torch::Tensor forward_grid(const torch::Tensor& x, const torch::Tensor& cell_mask, bool causal_rows);
  // Causal rows only: the next rows [B, n, W, C] of a grid whose earlier rows are summed in `cache`.
  torch::Tensor step_grid(const torch::Tensor& rows, const torch::Tensor& cell_mask, DoubleAttentionCache& cache);

  Linear phi{nullptr}, theta{nullptr}, rho{nullptr}, proj{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};  // norm pre or post

 private:
  // Both forms over groups of cells x [B, G, P, C] (a sequence: P = 1; a grid: rows of P cells):
  // every cell gathers from all cells or, when causal, from the groups <= its own; excluded
  // [B, G, P] (or undefined) cells give nothing and keep their input.
  torch::Tensor full_groups(const torch::Tensor& x, const torch::Tensor& excluded, bool causal);
  // The causal step over groups of cells x [B, G, P, C]: group g gathers from the cache and from
  // groups <= g (all P cells of each); excluded [B, G, P] (or undefined) cells give nothing.
  torch::Tensor step_groups(const torch::Tensor& x, const torch::Tensor& excluded, DoubleAttentionCache& cache);
  // What phi, theta and rho read: x, or LayerNorm(x) when pre-norm.
  torch::Tensor maps_input(const torch::Tensor& x);
  // x + dropout(proj(z)) (post-norm: its LayerNorm), left as x where `excluded` (broadcastable to
  // z's leading dims) is true.
  torch::Tensor output(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& excluded);
  bool causal_;
  double dropout_;
  BlockNorm norm_;
  int64_t causal_chunk_ = kDefaultCausalChunk;
};
TORCH_MODULE(DoubleAttention);

}  // namespace leanseq::nn
