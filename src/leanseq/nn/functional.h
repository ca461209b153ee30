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

namespace leanseq::nn {

// A layer's nonlinearity, parsed once from its config key (parse_activation) so that layers do not
// compare strings.
enum class Activation { relu, gelu, elu };
// ConfigError naming `key` for another name than relu, gelu or elu.
inline Activation parse_activation(const std::string& name, const std::string& key) {
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  if (name == "elu") return Activation::elu;
  throw ConfigError(key + ": '" + name + "' is not relu, gelu or elu");
}
inline torch::Tensor activate(const torch::Tensor& x, Activation a) {
  switch (a) {
    case Activation::gelu:
      return torch::gelu(x);
    case Activation::elu:
      return torch::elu(x);
    default:
      return torch::relu(x);
  }
}

// Attention's two products: scores = q k^T ([..., T, d] by [..., S, d]: [..., T, S]) and context =
// p v ([..., T, S] by [..., S, d]: [..., T, d]). With one query per row on the CPU (a decoding
// step) kernels/one_query_attention.h: ATen's CPU bmm makes one BLAS call per matrix of the batch,
// some microseconds each, which is most of what these products cost at a few hundred rows.
// Otherwise kernels::batched_matmul.
inline bool single_cpu_query(const torch::Tensor& q) { return q.size(-2) == 1 && q.device().is_cpu(); }
inline torch::Tensor attention_scores(const torch::Tensor& q, const torch::Tensor& k) {
  return single_cpu_query(q) ? kernels::one_query_scores(q, k) : kernels::batched_matmul(q, k.transpose(-1, -2));
}
inline torch::Tensor attention_context(const torch::Tensor& p, const torch::Tensor& v) {
  return single_cpu_query(p) ? kernels::one_query_context(p, v) : kernels::batched_matmul(p, v);
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
