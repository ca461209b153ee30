#include "leanseq/nn/double_attention.h"

#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

namespace {
constexpr double kMaskedLogit = -1e30;
}  // namespace

DoubleAttentionImpl::DoubleAttentionImpl(int64_t dim, int64_t m, int64_t n, bool causal, double dropout, BlockNorm norm)
    : causal_(causal), dropout_(dropout), norm_(norm) {
  phi = register_module("phi", make_linear(dim, m));
  theta = register_module("theta", make_linear(dim, n));
  rho = register_module("rho", make_linear(dim, n));
  proj = register_module("proj", make_linear(m, dim));
  if (norm != BlockNorm::none) layer_norm = register_module("layer_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
}

torch::Tensor DoubleAttentionImpl::maps_input(const torch::Tensor& x) {
  return norm_ == BlockNorm::pre ? layer_norm(x) : x;
}

torch::Tensor DoubleAttentionImpl::distribute_weights(const torch::Tensor& x) {
  return torch::softmax(rho(maps_input(x)), -1);
}

torch::Tensor DoubleAttentionImpl::output(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& excluded) {
  auto y = maybe_dropout(proj(z), dropout_, is_training());
  if (norm_ != BlockNorm::post) return x + (excluded.defined() ? y.masked_fill(excluded.unsqueeze(-1), 0.0) : y);
  auto out = layer_norm(x + y);
  return excluded.defined() ? torch::where(excluded.unsqueeze(-1), x, out) : out;
}

torch::Tensor DoubleAttentionImpl::full_groups(const torch::Tensor& x, const torch::Tensor& excluded, bool causal) {
  const auto B = x.size(0), G = x.size(1), P = x.size(2);
  auto h = maps_input(x);
  auto a = phi(h), logits = theta(h), d = torch::softmax(rho(h), -1);  // [B, G, P, m], [B, G, P, n] twice
  const auto m = a.size(-1), n = logits.size(-1);
  if (excluded.defined()) logits = logits.masked_fill(excluded.unsqueeze(-1), kMaskedLogit);
  torch::Tensor z;
  if (!causal) {
    auto w = torch::softmax(logits.reshape({B, G * P, n}), 1);          // over all cells
    auto g = torch::bmm(a.reshape({B, G * P, m}).transpose(1, 2), w);   // [B, m, n]
    z = torch::bmm(d.reshape({B, G * P, n}), g.transpose(1, 2)).view({B, G, P, m});
  } else {
    // Prefix sums over groups of exp(logit - c) A and exp(logit - c), c the maximum over the grid.
    auto ref = std::get<0>(logits.reshape({B, G * P, n}).max(1, true)).detach().unsqueeze(1);  // [B, 1, 1, n]
    auto e = torch::exp(logits - ref);
    if (excluded.defined()) e = e.masked_fill(excluded.unsqueeze(-1), 0.0);
    auto den = e.sum(2, true).cumsum(1).clamp_min(1e-30);  // [B, G, 1, n]
    if (P == 1) {
      // A sequence: z_t = sum_{s <= t} A_s sum_k (d_tk / den_tk) e_sk, a masked [T, T] product
      // (cheaper than [T, m, n] prefix states at sentence lengths, and the same values).
      auto w = torch::bmm((d / den).squeeze(2), e.squeeze(2).transpose(1, 2)).tril();  // [B, T, T]
      z = torch::bmm(w, a.squeeze(2)).unsqueeze(2);
    } else {
      auto num = torch::matmul(a.transpose(2, 3), e).cumsum(1);  // [B, G, m, n]
      z = torch::matmul(d, (num / den).transpose(2, 3));           // [B, G, P, m]
    }
  }
  return output(x, z, excluded);
}

torch::Tensor DoubleAttentionImpl::step_groups(const torch::Tensor& x, const torch::Tensor& excluded,
                                              DoubleAttentionCache& cache) {
  TORCH_CHECK(causal_, "DoubleAttention: step-by-step decoding needs the causal form");
  const auto B = x.size(0), G = x.size(1), P = x.size(2);
  auto h = maps_input(x);
  auto a = phi(h), logits = theta(h), d = torch::softmax(rho(h), -1);
  auto ex = excluded.defined() ? excluded.expand({B, G, P}) : torch::Tensor();
  if (ex.defined()) logits = logits.masked_fill(ex.unsqueeze(-1), kMaskedLogit);
  if (!cache.max.defined()) {
    const auto m = a.size(-1), n = logits.size(-1);
    cache.max = torch::full({B, 1, n}, kMaskedLogit, x.options());
    cache.num = torch::zeros({B, m, n}, x.options());
    cache.den = torch::zeros({B, 1, n}, x.options());
  }
  std::vector<torch::Tensor> zs;
  for (int64_t i = 0; i < G; ++i) {
    auto li = logits.select(1, i);  // [B, P, n]
    auto new_max = torch::maximum(cache.max, std::get<0>(li.max(1, true)));
    auto keep = torch::exp(cache.max - new_max), e = torch::exp(li - new_max);
    if (ex.defined()) e = e.masked_fill(ex.select(1, i).unsqueeze(-1), 0.0);
    cache.num = cache.num * keep + torch::bmm(a.select(1, i).transpose(1, 2), e);
    cache.den = cache.den * keep + e.sum(1, true);
    cache.max = new_max;
    auto g = cache.num / cache.den.clamp_min(1e-30);                    // [B, m, n]
    zs.push_back(torch::bmm(d.select(1, i), g.transpose(1, 2)));        // [B, P, m]
  }
  return output(x, torch::stack(zs, 1), ex);
}

torch::Tensor DoubleAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  auto ex = padding_mask.defined() ? padding_mask.unsqueeze(2) : torch::Tensor();
  return full_groups(x.unsqueeze(2), ex, causal_).squeeze(2);
}

torch::Tensor DoubleAttentionImpl::step(const torch::Tensor& x, DoubleAttentionCache& cache,
                                       const torch::Tensor& token_padding) {
  auto ex = token_padding.defined() ? token_padding.unsqueeze(2) : torch::Tensor();
  return step_groups(x.unsqueeze(2), ex, cache).squeeze(2);
}

torch::Tensor DoubleAttentionImpl::forward_grid(const torch::Tensor& x, const torch::Tensor& cell_mask,
                                                bool causal_rows) {
  auto ex = cell_mask.defined() ? cell_mask.expand({x.size(0), x.size(1), x.size(2)}) : torch::Tensor();
  return full_groups(x, ex, causal_rows);
}

torch::Tensor DoubleAttentionImpl::step_grid(const torch::Tensor& rows, const torch::Tensor& cell_mask,
                                             DoubleAttentionCache& cache) {
  return step_groups(rows, cell_mask, cache);
}

}  // namespace leanseq::nn
