// Multi-head attention with fairseq's parameterisation (q_proj, k_proj, v_proj, out_proj; q is
// scaled by head_dim^-0.5 after its projection) and incremental paths over typed caches. A layer
// that reuses another layer's attention distribution (SAN) is built without q_proj and k_proj and
// applies given probabilities to its own values.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/incremental_state.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

struct AttentionResult {
  torch::Tensor out;      // [B, T, C]
  torch::Tensor weights;  // [B, T, S] averaged over heads, only when requested
  torch::Tensor probs;    // [B, H, T, S] the attention distribution (before dropout)
};

class MultiheadAttentionImpl : public torch::nn::Module, public LowPrecision {
 public:
  // scores = false: no q_proj/k_proj; only the *_with methods, which take the distribution.
  // kv_dim: the width of the keys' and values' input when it differs from embed_dim (fairseq's
  // kdim = vdim: an encoder-decoder attention over a narrower or wider encoder; 0: embed_dim).
  MultiheadAttentionImpl(int64_t embed_dim, int64_t heads, double dropout, bool scores = true, int64_t kv_dim = 0);

  // query: [B, T, C]; key_value: [B, S, C]; key_padding_mask: [B, S] bool (true at pads) or
  // undefined; causal: query t sees keys <= t.
  AttentionResult forward(const torch::Tensor& query, const torch::Tensor& key_value,
                          const torch::Tensor& key_padding_mask, bool causal, bool need_weights);

  // Decoder self-attention over n new positions: appends their keys/values to `cache` and
  // attends causally over everything cached so far. query: [B, n, C]; new_key_padding: [B, n]
  // bool (true where the fed token is a pad) or undefined.
  AttentionResult step_self(const torch::Tensor& query, const torch::Tensor& new_key_padding,
                            SelfAttentionCache& cache, bool need_weights);

  // Encoder-decoder attention; the encoder keys/values are projected once into `cache`.
  AttentionResult step_static(const torch::Tensor& query, const torch::Tensor& memory,
                              const torch::Tensor& memory_padding_mask, StaticAttentionCache& cache,
                              bool need_weights);

  // A shared layer: `probs` [B, H, T, S] (another layer's distribution) over this layer's
  // values of `key_value` [B, S, C].
  AttentionResult forward_with(const torch::Tensor& key_value, const torch::Tensor& probs, bool need_weights);
  // Its incremental form: appends the values of the n new positions to `cache` (only `v` is
  // kept) and applies `probs` [B, H, n, T_so_far].
  AttentionResult step_self_with(const torch::Tensor& query, const torch::Tensor& probs, SelfAttentionCache& cache,
                                 bool need_weights);

  // The projections keep their own packed weights; in int8, decoder self-attention steps also
  // take q, k and v from one product of the three weights side by side (qkv_ below), and keys and
  // values are bfloat16 numbers (keys_and_values_in_bf16 below). In float32 the three weights
  // (and biases) become views of one tensor (qkv_weight_), so that a self-attention at inference
  // takes q, k and v from one product, with no second copy of them.
  void set_compute_type(kernels::ComputeType type) override;

  // Keys and values as bfloat16 numbers (set_compute_type sets it for int8 where the layer has keys,
  // clears it otherwise): a decoding step's caches store them so (half the bytes its attention
  // reads), and a whole-sequence pass of a causal self-attention or an encoder-decoder attention
  // rounds them so, to compute what the steps compute.
  void keys_and_values_in_bf16(bool on) { kv_bf16_ = on; }
  bool keys_and_values_in_bf16() const { return kv_bf16_; }

  // The weights a pass returns on request: the mean of the first n heads' distributions (0, the
  // default: of all heads), as an alignment layer's in fairseq and CTranslate2.
  void average_first_heads(int64_t n) { weight_heads_ = n; }

  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};

 private:
  torch::Tensor head_mean(const torch::Tensor& probs) const {
    return (weight_heads_ > 0 ? probs.narrow(1, 0, weight_heads_) : probs).mean(1);
  }
  torch::Tensor split_heads(const torch::Tensor& x) const;  // [B, T, C] -> [B, H, T, d]
  // q, k, v: [B, H, T|S, d] with q or k already scaled by 1/sqrt(d); mask: additive float
  // [*, *, T, S] or undefined.
  AttentionResult attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const torch::Tensor& mask, bool need_weights);
  // One query per row on the CPU at inference (a decoding step): the attention of q (scaled by
  // q_scale) in one kernel (kernels/one_query_attention.h), k, v and mask possibly shared by groups
  // of rows, or k and v in the rows their origin tables name; false, with `result` untouched, where
  // it does not apply.
  // Whether rows (q, or probs [B, H, 1, S]) are one query each on the CPU with no dropout to apply:
  // where the one-query kernels may stand in for the products.
  bool one_pass_applies(const torch::Tensor& rows) const;
  bool attend_in_one_pass(const torch::Tensor& q, double q_scale, const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& mask, bool need_weights, AttentionResult& result,
                          const torch::Tensor& k_origin = {}, const torch::Tensor& v_origin = {});
  // probs [B, H, T, S] (dropout applied here) over v [B, H, S, d].
  AttentionResult apply(const torch::Tensor& probs, const torch::Tensor& v, bool need_weights);
  // The result from the context ctx [B, H, T, d] of probs [B, H, T, S]: heads side by side, out_proj.
  AttentionResult with_context(const torch::Tensor& probs, const torch::Tensor& ctx, bool need_weights);
  void append_values(const torch::Tensor& query, SelfAttentionCache& cache);
  // int8 only: [q_proj; k_proj; v_proj] as one weight. The int8 product is exact integers scaled
  // per row and per column, so its three parts are the three products' floats bit for bit, for
  // one quantization of the query and one call instead of three.
  PackedWeight qkv_;
  // float32: [q_proj; k_proj; v_proj] weights [3C, C] (and biases [3C]) whose three parts are the
  // projections' own parameters (views); undefined otherwise.
  torch::Tensor qkv_weight_, qkv_bias_;
  // q, k and v of `x` [B, T, C] from one product ([B, T, 3C]) where qkv_ or qkv_weight_ allow it
  // (not where autograd records: the views' gradients would not reach the projections); undefined
  // otherwise.
  torch::Tensor fused_qkv(const torch::Tensor& x) const;
  bool kv_bf16_ = false;  // keys_and_values_in_bf16()
  torch::Tensor kv_rounded(const torch::Tensor& t) const {
    return kv_bf16_ && t.scalar_type() == torch::kFloat ? t.to(torch::kBFloat16).to(torch::kFloat) : t;
  }
  torch::ScalarType kv_stored(const torch::Tensor& t) const {
    return kv_bf16_ && t.scalar_type() == torch::kFloat ? torch::kBFloat16 : t.scalar_type();
  }
  int64_t embed_dim_, kv_dim_, heads_, head_dim_, weight_heads_ = 0;
  double dropout_, scaling_;
};
TORCH_MODULE(MultiheadAttention);

// Additive mask [1, 1, T, S]: 0 where key s may be seen by query t (s <= t + offset), -inf else.
torch::Tensor causal_mask(int64_t T, int64_t S, int64_t offset, const torch::TensorOptions& opts);
// Additive mask [B, 1, 1, S] from a bool padding mask [B, S].
torch::Tensor padding_to_additive(const torch::Tensor& key_padding_mask, const torch::TensorOptions& opts);

}  // namespace leanseq::nn
