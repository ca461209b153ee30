#include "leanseq/nn/double_attention.h"

#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

namespace {
constexpr double kMaskedLogit = -1e30;

// Causal gather over groups of positions: a[B, G, P, m] features and e[B, G, P, n] = exp(logit -
// reference) of each group's P positions. Group g gathers from groups <= g. Returns [B, G, m, n].
torch::Tensor causal_gather(const torch::Tensor& a, const torch::Tensor& e) {
  auto num = torch::einsum("bgpm,bgpn->bgmn", {a, e}).cumsum(1);
  auto den = e.sum(2).cumsum(1).unsqueeze(2);  // [B, G, 1, n]
  return num / den.clamp_min(1e-30);
}
}  // namespace

DoubleAttentionImpl::DoubleAttentionImpl(int64_t dim, int64_t m, int64_t n, bool causal, double dropout)
    : causal_(causal), dropout_(dropout) {
  phi = register_module("phi", make_linear(dim, m));
  theta = register_module("theta", make_linear(dim, n));
  rho = register_module("rho", make_linear(dim, n));
  proj = register_module("proj", make_linear(m, dim));
}

torch::Tensor DoubleAttentionImpl::distribute_weights(const torch::Tensor& x) { return torch::softmax(rho(x), -1); }

torch::Tensor DoubleAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  auto a = phi(x);            // [B, T, m]
  auto logits = theta(x);     // [B, T, n]
  auto d = distribute_weights(x);  // [B, T, n], a softmax over the n descriptors
  if (padding_mask.defined()) logits = logits.masked_fill(padding_mask.unsqueeze(-1), kMaskedLogit);
  torch::Tensor z;
  if (!causal_) {
    auto w = torch::softmax(logits, 1);                  // over positions
    auto g = torch::bmm(a.transpose(1, 2), w);           // [B, m, n]
    z = torch::bmm(d, g.transpose(1, 2));                // [B, T, m]
  } else {
    auto ref = std::get<0>(logits.max(1, true)).detach();  // [B, 1, n]
    auto e = torch::exp(logits - ref);
    auto g = causal_gather(a.unsqueeze(2), e.unsqueeze(2));  // [B, T, m, n]
    z = torch::einsum("btmn,btn->btm", {g, d});
  }
  auto y = maybe_dropout(proj(z), dropout_, is_training());
  if (padding_mask.defined()) y = y.masked_fill(padding_mask.unsqueeze(-1), 0.0);
  return x + y;
}

torch::Tensor DoubleAttentionImpl::step(const torch::Tensor& x, DoubleAttentionCache& cache,
                                       const torch::Tensor& token_padding) {
  TORCH_CHECK(causal_, "DoubleAttention::step needs the causal form");
  auto a = phi(x), logits = theta(x), d = distribute_weights(x);
  if (token_padding.defined()) logits = logits.masked_fill(token_padding.unsqueeze(-1), kMaskedLogit);
  if (!cache.max.defined()) {
    const auto B = x.size(0), m = a.size(-1), n = logits.size(-1);
    cache.max = torch::full({B, 1, n}, kMaskedLogit, x.options());
    cache.num = torch::zeros({B, m, n}, x.options());
    cache.den = torch::zeros({B, 1, n}, x.options());
  }
  std::vector<torch::Tensor> zs;
  for (int64_t t = 0; t < x.size(1); ++t) {
    auto lt = logits.select(1, t).unsqueeze(1);  // [B, 1, n]
    auto new_max = torch::maximum(cache.max, lt);
    auto keep = torch::exp(cache.max - new_max), e = torch::exp(lt - new_max);
    if (token_padding.defined()) e = e.masked_fill(token_padding.select(1, t).view({-1, 1, 1}), 0.0);
    cache.num = cache.num * keep + a.select(1, t).unsqueeze(2) * e;
    cache.den = cache.den * keep + e;
    cache.max = new_max;
    auto g = cache.num / cache.den.clamp_min(1e-30);                           // [B, m, n]
    zs.push_back(torch::bmm(g, d.select(1, t).unsqueeze(2)).transpose(1, 2));  // [B, 1, m]
  }
  auto y = maybe_dropout(proj(torch::cat(zs, 1)), dropout_, is_training());
  if (token_padding.defined()) y = y.masked_fill(token_padding.unsqueeze(-1), 0.0);
  return x + y;
}

torch::Tensor DoubleAttentionImpl::forward_grid(const torch::Tensor& x, bool causal_rows) {
  const auto B = x.size(0), H = x.size(2), W = x.size(3);
  auto cells = x.permute({0, 2, 3, 1});  // [B, H, W, C]
  auto a = phi(cells), logits = theta(cells), d = distribute_weights(cells);
  const auto m = a.size(-1), n = logits.size(-1);
  torch::Tensor g;  // [B, groups, m, n]
  if (!causal_rows) {
    auto w = torch::softmax(logits.reshape({B, H * W, n}), 1);
    g = torch::bmm(a.reshape({B, H * W, m}).transpose(1, 2), w).unsqueeze(1);
  } else {
    auto ref = std::get<0>(logits.reshape({B, H * W, n}).max(1, true)).detach().unsqueeze(1);  // [B, 1, 1, n]
    g = causal_gather(a, torch::exp(logits - ref));  // rows are the groups
  }
  auto z = torch::einsum("bhmn,bhwn->bhwm", {g.expand({B, H, m, n}), d});
  auto y = cells + maybe_dropout(proj(z), dropout_, is_training());
  return y.permute({0, 3, 1, 2});
}

}  // namespace leanseq::nn
