#include "leanseq/nn/double_attention.h"

#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

namespace {
// The causal gather-distribute over a sequence: z_t = sum_{s <= t} a_s sum_k (d_tk / den_tk) e_sk with
// den_t = sum_{s <= t} e_s. a [B, T, m], e [B, T, n] (exponentiated logits, 0 at excluded
// positions), d [B, T, n] -> z [B, T, m]. The sequence is cut into N chunks of `chunk` positions:
// inside a chunk, a masked [c, c] product; across chunks, the sums a^T e of the chunks before
// ([B, N, m, n], an exclusive prefix sum over chunks). Time and memory grow linearly with T; a
// chunk as long as the sequence is the plain masked [T, T] form.
torch::Tensor causal_sequence(const torch::Tensor& a, const torch::Tensor& e, const torch::Tensor& d, int64_t chunk) {
  const int64_t B = a.size(0), T = a.size(1), m = a.size(2), n = e.size(2);
  auto q = d / e.cumsum(1).clamp_min(1e-30);  // [B, T, n]
  if (chunk <= 0 || chunk >= T) {
    return torch::bmm(torch::bmm(q, e.transpose(1, 2)).tril(), a);
  }
  const int64_t N = (T + chunk - 1) / chunk, pad = N * chunk - T;
  auto split = [&](const torch::Tensor& x) {  // [B, T, C] -> [B * N, chunk, C], zeros after T
    auto padded = pad ? torch::constant_pad_nd(x, {0, 0, 0, pad}) : x;
    return padded.reshape({B * N, chunk, x.size(2)});
  };
  auto ac = split(a), ec = split(e), qc = split(q);
  auto z = torch::bmm(torch::bmm(qc, ec.transpose(1, 2)).tril(), ac);   // [B * N, chunk, m]
  auto sums = torch::bmm(ac.transpose(1, 2), ec).view({B, N, m, n});   // each chunk's a^T e
  auto before = (sums.cumsum(1) - sums).view({B * N, m, n});            // the chunks before each
  z = z + torch::bmm(qc, before.transpose(1, 2));
  return z.view({B, N * chunk, m}).narrow(1, 0, T);
}
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
  if (!causal && fixed_order_inference(x)) {
    // At inference, the gather as attention over the cells (each descriptor a query whose values
    // are A's rows) and the distribution as attention over the descriptors: sums in one order
    // whatever the padding (kernels/softmax.h, kernels/one_query_attention.h), so a sentence's
    // output is the same bits alone and padded in a batch.
    auto w = kernels::fixed_order_softmax(logits.reshape({B, G * P, n}).transpose(1, 2));  // [B, n, G P]
    auto values = a.reshape({B, 1, G * P, m}).expand({B, n, G * P, m});
    auto g = kernels::one_query_context(w.unsqueeze(2), values);  // [B, n, 1, m]
    z = kernels::one_query_context(d.reshape({B * G * P, 1, 1, n}), g.view({B, 1, n, m})).view({B, G, P, m});
  } else if (!causal) {
    auto w = torch::softmax(logits.reshape({B, G * P, n}), 1);          // over all cells
    auto g = torch::bmm(a.reshape({B, G * P, m}).transpose(1, 2), w);   // [B, m, n]
    z = torch::bmm(d.reshape({B, G * P, n}), g.transpose(1, 2)).view({B, G, P, m});
  } else {
    // Prefix sums over groups of exp(logit - c) A and exp(logit - c), c the maximum over the grid.
    auto ref = std::get<0>(logits.reshape({B, G * P, n}).max(1, true)).detach().unsqueeze(1);  // [B, 1, 1, n]
    auto e = torch::exp(logits - ref);
    if (excluded.defined()) e = e.masked_fill(excluded.unsqueeze(-1), 0.0);
    if (P == 1) {
      z = causal_sequence(a.squeeze(2), e.squeeze(2), d.squeeze(2), causal_chunk_).unsqueeze(2);
    } else {
      auto den = e.sum(2, true).cumsum(1).clamp_min(1e-30);       // [B, G, 1, n]
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
    // a^T e: with one position per group (a sequence's step), an outer product per row, computed
    // elementwise (the same products) rather than by a bmm that makes one BLAS call per row.
    auto ai = a.select(1, i).transpose(1, 2);  // [B, m, P]
    cache.num = cache.num * keep + (P == 1 ? ai * e : torch::bmm(ai, e));
    cache.den = cache.den * keep + e.sum(1, true);
    cache.max = new_max;
    auto g = cache.num / cache.den.clamp_min(1e-30);                     // [B, m, n]
    zs.push_back(attention_context(d.select(1, i), g.transpose(1, 2)));  // [B, P, m]
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
