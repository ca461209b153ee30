#include "leanseq/nn/lightconv.h"

#include "leanseq/kernels/lightconv_ref.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/linear.h"
#include "leanseq/nn/transformer_layer.h"

namespace leanseq::nn {

namespace {

LightConvOptions conv_options(const LightConvLayerOptions& o, int64_t padding_l) {
  LightConvOptions c;
  c.channels = o.conv_dim, c.kernel_size = o.kernel_size, c.padding_l = padding_l, c.heads = o.heads;
  c.dynamic = o.dynamic, c.weight_softmax = o.weight_softmax, c.weight_dropout = o.weight_dropout, c.impl = o.impl;
  return c;
}

TransformerLayerOptions ffn_options(const LightConvLayerOptions& o) {
  TransformerLayerOptions t;
  t.embed_dim = o.embed_dim, t.ffn_dim = o.ffn_dim, t.dropout = o.dropout, t.activation_dropout = o.relu_dropout;
  t.normalize_before = o.normalize_before;
  return t;
}

// [LN] -> input dropout -> linear1 [-> GLU] -> conv -> linear2 -> dropout -> + x -> [LN].
template <class Conv>
torch::Tensor conv_block(const torch::Tensor& x, const LightConvLayerOptions& o, Linear& linear1,
                         Linear& linear2, torch::nn::LayerNorm& norm, bool training, Conv&& conv) {
  auto h = o.normalize_before ? norm(x) : x;
  h = linear1(maybe_dropout(h, o.input_dropout, training));
  if (o.glu) h = torch::glu(h, -1);
  return residual_add(x, linear2(conv(h)), o.dropout, training, norm, !o.normalize_before);
}

void register_conv_block(torch::nn::Module& m, const LightConvLayerOptions& o, int64_t padding_l,
                         Linear& linear1, LightConv1d& conv, Linear& linear2) {
  linear1 = m.register_module("linear1", make_linear(o.embed_dim, o.glu ? 2 * o.conv_dim : o.conv_dim));
  conv = m.register_module("conv", LightConv1d(conv_options(o, padding_l)));
  linear2 = m.register_module("linear2", make_linear(o.conv_dim, o.embed_dim));
}
}  // namespace

// ---------------------------------------------------------------- convolution

LightConv1dImpl::LightConv1dImpl(const LightConvOptions& o) : o_(o) {
  TORCH_CHECK(o.channels % o.heads == 0, "lightconv: channels ", o.channels, " not divisible by heads ", o.heads);
  if (o.dynamic) {
    weight_linear = register_module("weight_linear", make_linear(o.channels, o.heads * o.kernel_size, false));
    if (o.bias) conv_bias = register_parameter("conv_bias", torch::zeros({o.channels}));
  } else {
    weight = register_parameter("weight", torch::empty({o.heads, 1, o.kernel_size}));
    torch::nn::init::xavier_uniform_(weight);
    if (o.bias) bias = register_parameter("bias", torch::zeros({o.channels}));
  }
}

torch::Tensor LightConv1dImpl::kernels_for(const torch::Tensor& x) {
  torch::Tensor w;
  if (o_.dynamic) {
    auto logits = weight_linear(x).view({x.size(0), x.size(1), o_.heads, o_.kernel_size});
    w = (o_.weight_softmax ? torch::softmax(logits, -1) : logits).permute({0, 2, 1, 3});
  } else {
    auto raw = weight.view({o_.heads, o_.kernel_size});
    w = o_.weight_softmax ? torch::softmax(raw, -1) : raw;
  }
  return maybe_dropout(w, o_.weight_dropout, is_training());
}

torch::Tensor LightConv1dImpl::add_bias(torch::Tensor y) const {
  const auto& b = o_.dynamic ? conv_bias : bias;
  return b.defined() ? y + b : y;
}

torch::Tensor LightConv1dImpl::forward(const torch::Tensor& x) {
  return add_bias(kernels::lightconv(x, kernels_for(x), o_.padding_l, o_.impl));
}

torch::Tensor LightConv1dImpl::step(const torch::Tensor& x_new, ConvWindowCache& cache) {
  TORCH_CHECK(o_.padding_l == o_.kernel_size - 1, "lightconv: step() needs a causal convolution (padding_l = K - 1)");
  const int64_t B = x_new.size(0), n = x_new.size(1), K = o_.kernel_size;
  if (!cache.window.defined()) cache.window = torch::zeros({B, K - 1, x_new.size(2)}, x_new.options());
  auto w = kernels_for(x_new);
  if (w.dim() == 2) w = w.view({1, o_.heads, 1, K}).expand({B, o_.heads, n, K});
  auto [y, window] = kernels::lightconv_causal_step(cache.window, x_new, w);
  cache.window = window;
  return add_bias(y);
}

// ---------------------------------------------------------------- layers

LightConvEncoderLayerImpl::LightConvEncoderLayerImpl(const LightConvLayerOptions& o) : o_(o) {
  register_conv_block(*this, o, (o.kernel_size - 1) / 2, linear1, conv, linear2);
  fc1 = register_module("fc1", make_linear(o.embed_dim, o.ffn_dim));
  fc2 = register_module("fc2", make_linear(o.ffn_dim, o.embed_dim));
  layer_norm1 = register_module("layer_norm1", layer_norm(o.embed_dim));
  layer_norm2 = register_module("layer_norm2", layer_norm(o.embed_dim));
}

torch::Tensor LightConvEncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  auto h = conv_block(x, o_, linear1, linear2, layer_norm1, is_training(), [&](const torch::Tensor& in) {
    // Pads must not leak into their neighbours' windows: zero the conv input there.
    return conv(padding_mask.defined() ? in.masked_fill(padding_mask.unsqueeze(-1), 0.0) : in);
  });
  return feed_forward(h, fc1, fc2, layer_norm2, ffn_options(o_), is_training());
}

LightConvDecoderLayerImpl::LightConvDecoderLayerImpl(const LightConvLayerOptions& o) : o_(o) {
  register_conv_block(*this, o, o.kernel_size - 1, linear1, conv, linear2);
  conv_layer_norm = register_module("conv_layer_norm", layer_norm(o.embed_dim));
  if (o.encoder_attention) {
    encoder_attn = register_module("encoder_attn", MultiheadAttention(o.embed_dim, o.heads, o.attention_dropout));
    encoder_attn_layer_norm = register_module("encoder_attn_layer_norm", layer_norm(o.embed_dim));
  }
  fc1 = register_module("fc1", make_linear(o.embed_dim, o.ffn_dim));
  fc2 = register_module("fc2", make_linear(o.ffn_dim, o.embed_dim));
  final_layer_norm = register_module("final_layer_norm", layer_norm(o.embed_dim));
}

AttentionResult LightConvDecoderLayerImpl::after_conv(
    const torch::Tensor& x, const std::function<AttentionResult(const torch::Tensor&)>& attend) {
  if (!o_.encoder_attention) {
    return {feed_forward(x, fc1, fc2, final_layer_norm, ffn_options(o_), is_training()), {}, {}};
  }
  auto h = o_.normalize_before ? encoder_attn_layer_norm(x) : x;
  auto r = attend(h);
  h = residual_add(x, r.out, o_.dropout, is_training(), encoder_attn_layer_norm, !o_.normalize_before);
  return {feed_forward(h, fc1, fc2, final_layer_norm, ffn_options(o_), is_training()), r.weights, {}};
}

AttentionResult LightConvDecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& memory,
                                                   const torch::Tensor& memory_padding_mask, bool need_attn) {
  auto h = conv_block(x, o_, linear1, linear2, conv_layer_norm, is_training(),
                      [&](const torch::Tensor& in) { return conv(in); });
  return after_conv(h, [&](const torch::Tensor& q) {
    return encoder_attn(q, memory, memory_padding_mask, false, need_attn);
  });
}

void LightConvDecoderLayerImpl::name_state(const std::string& name) {
  conv_state_ = name + ".conv";
  cross_state_ = name + ".encoder_attn";
}

AttentionResult LightConvDecoderLayerImpl::step(const torch::Tensor& x, const torch::Tensor& memory,
                                                const torch::Tensor& memory_padding_mask, IncrementalState& state,
                                                bool need_attn) {
  auto h = conv_block(x, o_, linear1, linear2, conv_layer_norm, is_training(), [&](const torch::Tensor& in) {
    return conv->step(in, state.get<ConvWindowCache>(conv_state_));
  });
  return after_conv(h, [&](const torch::Tensor& q) {
    return encoder_attn->step_static(q, memory, memory_padding_mask, state.get<StaticAttentionCache>(cross_state_),
                                     need_attn);
  });
}

}  // namespace leanseq::nn
