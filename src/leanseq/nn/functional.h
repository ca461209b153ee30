// Small helpers every layer and model uses, with fairseq's conventions.
#pragma once
#include <torch/torch.h>

#include <string>

#include "leanseq/core/error.h"

#include "leanseq/kernels/add_layer_norm.h"
#include "leanseq/kernels/batched_matmul.h"
#include "leanseq/kernels/dropout.h"
#include "leanseq/kernels/dropout_add_layer_norm.h"
#include "leanseq/kernels/one_query_attention.h"
#include "leanseq/kernels/softmax.h"

namespace leanseq::nn {

// A layer's nonlinearity, parsed once from its config key (parse_activation) so that layers do not
// compare strings. gelu_tanh is gelu's tanh approximation (fairseq's gelu_accurate, CTranslate2's
// GELUTanh), swish x * sigmoid(x).
enum class Activation { relu, gelu, elu, gelu_tanh, swish };
// ConfigError naming `key` for another name than relu, gelu, gelu_accurate (or its older name
// gelu_fast), swish or elu.
inline Activation parse_activation(const std::string& name, const std::string& key) {
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  if (name == "gelu_accurate" || name == "gelu_fast") return Activation::gelu_tanh;
  if (name == "swish") return Activation::swish;
  if (name == "elu") return Activation::elu;
  throw ConfigError(key + ": '" + name + "' is not relu, gelu, gelu_accurate, swish or elu");
}
inline torch::Tensor activate(const torch::Tensor& x, Activation a) {
  switch (a) {
    case Activation::gelu:
      return torch::gelu(x);
    case Activation::gelu_tanh:
      return torch::gelu(x, "tanh");
    case Activation::swish:
      return torch::silu(x);
    case Activation::elu:
      return torch::elu(x);
    default:
      return torch::relu(x);
  }
}

// A logit that no kept logit can approach: finite, so that a row with every key masked softmaxes
// to a uniform row (later zeroed) instead of NaN.
constexpr double kMaskedLogit = -1e30;

// Float32 inference on the CPU (no gradient recorded): where layers take their fixed-order paths
// (attention below, ConvS2S's window products, A2's gather), whose sums do not depend on the
// padding, so that a sentence is the same bits alone and padded in a batch.
inline bool fixed_order_inference(const torch::Tensor& x) {
  return x.device().is_cpu() && x.scalar_type() == torch::kFloat && !torch::GradMode::is_enabled();
}

// Attention's two products: scores = q k^T ([..., T, d] by [..., S, d]: [..., T, S]) and context =
// p v ([..., T, S] by [..., S, d]: [..., T, d]). With one query per row on the CPU (a decoding
// step) kernels/one_query_attention.h: ATen's CPU bmm makes one BLAS call per matrix of the batch,
// some microseconds each, which is most of what these products cost at a few hundred rows.
// Several queries per row [B, H, T, d] at inference on the CPU (an encoder, a full pass) go through
// the same kernels, each query a row sharing its sentence's keys: their sums run in a fixed order,
// where a BLAS product's order changes with the number of keys, so a sentence's attention is the
// same bits alone and padded in a batch (the padded keys' weights are exact zeros, added last).
// Otherwise (training) kernels::batched_matmul.
inline bool single_cpu_query(const torch::Tensor& q) { return q.size(-2) == 1 && q.device().is_cpu(); }
inline bool fixed_order_cpu_queries(const torch::Tensor& q) { return q.dim() == 4 && fixed_order_inference(q); }
// [B, H, T, X] as T rows per sentence, [B * T, H, 1, X], and back.
inline torch::Tensor queries_as_rows(const torch::Tensor& x) {
  return x.permute({0, 2, 1, 3}).reshape({x.size(0) * x.size(2), x.size(1), 1, x.size(3)});
}
inline torch::Tensor rows_as_queries(const torch::Tensor& x, int64_t B) {
  return x.view({B, x.size(0) / B, x.size(1), x.size(3)}).permute({0, 2, 1, 3});
}
inline torch::Tensor attention_scores(const torch::Tensor& q, const torch::Tensor& k) {
  if (single_cpu_query(q)) return kernels::one_query_scores(q, k);
  if (fixed_order_cpu_queries(q)) return rows_as_queries(kernels::one_query_scores(queries_as_rows(q), k), q.size(0));
  return kernels::batched_matmul(q, k.transpose(-1, -2));
}
inline torch::Tensor attention_context(const torch::Tensor& p, const torch::Tensor& v) {
  if (single_cpu_query(p)) return kernels::one_query_context(p, v);
  if (fixed_order_cpu_queries(p)) return rows_as_queries(kernels::one_query_context(queries_as_rows(p), v), p.size(0));
  return kernels::batched_matmul(p, v);
}

// softmax over the keys (the last dimension): kernels/softmax.h's fixed order for float32 CPU
// scores while no gradient is recorded (inference, validation), so that a sentence's probabilities
// are the same bits alone and padded in a batch; ATen's softmax otherwise, in `dtype` when given.
inline torch::Tensor attention_softmax(const torch::Tensor& scores,
                                       c10::optional<torch::ScalarType> dtype = c10::nullopt) {
  if (auto probs = kernels::fixed_order_softmax(scores); probs.defined()) return probs;
  return torch::softmax(scores, -1, dtype);
}

// fairseq's padding index (<pad> = 1 in every dictionary).
constexpr int64_t kPadIndex = 1;

// `mask` when any entry is set, else an undefined tensor, with which layers skip masking.
inline torch::Tensor mask_if_any(const torch::Tensor& mask) { return mask.any().item<bool>() ? mask : torch::Tensor(); }

// LayerNorm over the last dimension with fairseq's epsilon.
inline torch::nn::LayerNorm layer_norm(int64_t dim) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-5));
}

// A LayerNorm when `present` (a pre-norm stack's final norm), an empty holder otherwise.
inline torch::nn::LayerNorm optional_layer_norm(bool present, int64_t dim) {
  return present ? layer_norm(dim) : torch::nn::LayerNorm(nullptr);
}

// Dropout that costs nothing when p = 0.
inline torch::Tensor maybe_dropout(const torch::Tensor& x, double p, bool training) {
  return p > 0 ? kernels::dropout(x, p, training) : x;
}

// The end of a sublayer: residual + dropout(y), followed by `norm` for post-norm layers; one
// operator for post-norm layers, in training (kernels/dropout_add_layer_norm.h) and at inference
// (kernels/add_layer_norm.h). Pre-norm layers normalise their input instead and leave the sum as
// it is.
inline torch::Tensor residual_add(const torch::Tensor& residual, const torch::Tensor& y, double dropout, bool training,
                                  torch::nn::LayerNorm& norm, bool post_norm) {
  if (!post_norm) return residual + maybe_dropout(y, dropout, training);
  return kernels::dropout_add_layer_norm(residual, y, dropout, training, norm->weight, norm->bias,
                                         norm->options.eps());
}

}  // namespace leanseq::nn
