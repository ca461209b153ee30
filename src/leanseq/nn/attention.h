// Multi-head attention with fairseq's parameterisation (q_proj, k_proj, v_proj, out_proj; q is
// scaled by head_dim^-0.5 after its projection) and incremental paths over typed caches.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/incremental_state.h"

namespace leanseq::nn {

struct AttentionResult {
  torch::Tensor out;      // [B, T, C]
  torch::Tensor weights;  // [B, T, S] averaged over heads, only when requested
};

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t heads, double dropout);

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

  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};

 private:
  torch::Tensor split_heads(const torch::Tensor& x) const;  // [B, T, C] -> [B, H, T, d]
  // q, k, v: [B, H, T|S, d]; mask: additive float [*, *, T, S] or undefined.
  AttentionResult attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const torch::Tensor& mask, bool need_weights);
  int64_t embed_dim_, heads_, head_dim_;
  double dropout_, scaling_;
};
TORCH_MODULE(MultiheadAttention);

// Additive mask [1, 1, T, S]: 0 where key s may be seen by query t (s <= t + offset), -inf else.
torch::Tensor causal_mask(int64_t T, int64_t S, int64_t offset, const torch::TensorOptions& opts);
// Additive mask [B, 1, 1, S] from a bool padding mask [B, S].
torch::Tensor padding_to_additive(const torch::Tensor& key_padding_mask, const torch::TensorOptions& opts);

}  // namespace leanseq::nn
