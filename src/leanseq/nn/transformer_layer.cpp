#include "leanseq/nn/transformer_layer.h"

#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"

namespace leanseq::nn {

torch::Tensor feed_forward(const torch::Tensor& x, Linear& fc1, Linear& fc2,
                           torch::nn::LayerNorm& norm, const TransformerLayerOptions& o, bool training) {
  auto h = o.normalize_before ? norm(x) : x;
  h = o.activation == Activation::relu ? fc1->forward_relu(h) : activate(fc1(h), o.activation);
  h = maybe_dropout(h, o.activation_dropout, training);
  return residual_add(x, fc2(h), o.dropout, training, norm, !o.normalize_before);
}

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerLayerOptions& o) : o_(o) {
  self_attn = register_module("self_attn",
                              MultiheadAttention(o.embed_dim, o.heads, o.attention_dropout, !o.reuse_self_attn));
  self_attn_layer_norm = register_module("self_attn_layer_norm", layer_norm(o.embed_dim));
  fc1 = register_module("fc1", make_linear(o.embed_dim, o.ffn_dim));
  fc2 = register_module("fc2", make_linear(o.ffn_dim, o.embed_dim));
  final_layer_norm = register_module("final_layer_norm", layer_norm(o.embed_dim));
}

torch::Tensor TransformerEncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& padding_mask,
                                                  SharedAttention& shared) {
  auto residual = x;
  auto h = o_.normalize_before ? self_attn_layer_norm(x) : x;
  if (o_.reuse_self_attn) {
    h = self_attn->forward_with(h, shared.self_probs, false).out;
  } else {
    auto r = self_attn(h, h, padding_mask, false, false);
    shared.self_probs = r.probs;
    h = r.out;
  }
  h = residual_add(residual, h, o_.dropout, is_training(), self_attn_layer_norm, !o_.normalize_before);
  return feed_forward(h, fc1, fc2, final_layer_norm, o_, is_training());
}

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const TransformerLayerOptions& o) : o_(o) {
  if (o.average_self_attn) {
    avg_attn = register_module("avg_attn", AverageAttention(o.embed_dim, o.average_ffn_dim, o.activation_dropout, o.average_fold));
  } else {
    self_attn = register_module(
        "self_attn", MultiheadAttention(o.embed_dim, o.heads, o.attention_dropout, !o.reuse_self_attn));
  }
  self_attn_layer_norm = register_module("self_attn_layer_norm", layer_norm(o.embed_dim));
  if (!o.reuse_encoder_attn && !o.no_encoder_attn) {
    encoder_attn =
        register_module("encoder_attn", MultiheadAttention(o.embed_dim, o.heads, o.attention_dropout, true,
                                                           o.encoder_embed_dim));
  }
  if (!o.no_encoder_attn) encoder_attn_layer_norm = register_module("encoder_attn_layer_norm", layer_norm(o.embed_dim));
  fc1 = register_module("fc1", make_linear(o.embed_dim, o.ffn_dim));
  fc2 = register_module("fc2", make_linear(o.ffn_dim, o.embed_dim));
  final_layer_norm = register_module("final_layer_norm", layer_norm(o.embed_dim));
}

template <class Attend>
torch::Tensor TransformerDecoderLayerImpl::residual_block(const torch::Tensor& x, torch::nn::LayerNorm& norm,
                                                          Attend&& attend) {
  auto h = o_.normalize_before ? norm(x) : x;
  return residual_add(x, attend(h), o_.dropout, is_training(), norm, !o_.normalize_before);
}

template <class Attend>
AttentionResult TransformerDecoderLayerImpl::encoder_attention(SharedAttention& shared, Attend&& attend) {
  if (!o_.reuse_encoder_attn) shared.encoder = attend();
  return shared.encoder;
}

AttentionResult TransformerDecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& self_padding_mask,
                                                     const torch::Tensor& memory,
                                                     const torch::Tensor& memory_padding_mask, bool need_attn,
                                                     SharedAttention& shared) {
  torch::Tensor attn;
  auto h = residual_block(x, self_attn_layer_norm, [&](const torch::Tensor& in) {
    if (avg_attn) return avg_attn(in, self_padding_mask);
    if (o_.reuse_self_attn) return self_attn->forward_with(in, shared.self_probs, false).out;
    auto r = self_attn(in, in, self_padding_mask, true, false);
    shared.self_probs = r.probs;
    return r.out;
  });
  if (!o_.no_encoder_attn) {
    h = residual_block(h, encoder_attn_layer_norm, [&](const torch::Tensor& in) {
      auto r = encoder_attention(shared, [&] { return encoder_attn(in, memory, memory_padding_mask, false, need_attn); });
      attn = r.weights;
      return r.out;
    });
  }
  return {feed_forward(h, fc1, fc2, final_layer_norm, o_, is_training()), attn, {}};
}

void TransformerDecoderLayerImpl::name_state(const std::string& name) {
  self_state_ = name + ".self_attn";
  cross_state_ = name + ".encoder_attn";
}

AttentionResult TransformerDecoderLayerImpl::step(const torch::Tensor& x, const torch::Tensor& token_padding,
                                                  const torch::Tensor& memory,
                                                  const torch::Tensor& memory_padding_mask, IncrementalState& state,
                                                  bool need_attn, SharedAttention& shared) {
  torch::Tensor attn;
  auto h = residual_block(x, self_attn_layer_norm, [&](const torch::Tensor& in) {
    if (avg_attn) return avg_attn->step(in, token_padding, state.get<AverageCache>(self_state_));
    auto& cache = state.get<SelfAttentionCache>(self_state_);
    if (o_.reuse_self_attn) return self_attn->step_self_with(in, shared.self_probs, cache, false).out;
    auto r = self_attn->step_self(in, token_padding, cache, false);
    shared.self_probs = r.probs;
    return r.out;
  });
  if (!o_.no_encoder_attn) {
    h = residual_block(h, encoder_attn_layer_norm, [&](const torch::Tensor& in) {
      auto r = encoder_attention(shared, [&] {
        return encoder_attn->step_static(in, memory, memory_padding_mask, state.get<StaticAttentionCache>(cross_state_),
                                         need_attn);
      });
      attn = r.weights;
      return r.out;
    });
  }
  return {feed_forward(h, fc1, fc2, final_layer_norm, o_, is_training()), attn, {}};
}

}  // namespace leanseq::nn
