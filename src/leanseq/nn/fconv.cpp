#include "leanseq/nn/fconv.h"

#include <cmath>
#include <limits>

#include "leanseq/kernels/dense.h"
#include "leanseq/nn/functional.h"

namespace leanseq::nn {

namespace {
class GradMultiply : public torch::autograd::Function<GradMultiply> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, double scale) {
    ctx->saved_data["scale"] = scale;
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    return {grad[0] * ctx->saved_data["scale"].toDouble(), torch::Tensor()};
  }
};

// torch.conv_tbc with a backward that accepts a gradient of any layout (ATen's needs a contiguous
// one, and the layers transpose between batch-major and time-major).
class ConvTBCFunction : public torch::autograd::Function<ConvTBCFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b, int64_t pad) {
    ctx->save_for_backward({x, w, b});
    ctx->saved_data["pad"] = pad;
    return torch::conv_tbc(x, w, b, pad);  // under autocast, in its type
  }
  // In the gradient's type (autocast's, in mixed-precision training), each result back in its input's.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto s = ctx->get_saved_variables();
    auto g = grad[0].contiguous();
    const auto t = g.scalar_type();
    auto [dx, dw, db] =
        torch::conv_tbc_backward(g, s[0].to(t), s[1].to(t), s[2].to(t), ctx->saved_data["pad"].toInt());
    return {dx.to(s[0].scalar_type()), dw.to(s[1].scalar_type()), db.to(s[2].scalar_type()), torch::Tensor()};
  }
};

const double kSqrtHalf = std::sqrt(0.5);
}  // namespace

torch::Tensor grad_multiply(const torch::Tensor& x, double scale) { return GradMultiply::apply(x, scale); }

torch::Tensor weight_norm(const torch::Tensor& v, const torch::Tensor& g, int64_t dim) {
  return torch::_weight_norm(v, g, dim);
}

WeightNormLinearImpl::WeightNormLinearImpl(int64_t in, int64_t out, double dropout) {
  auto v = torch::randn({out, in}) * std::sqrt((1.0 - dropout) / static_cast<double>(in));
  weight_g = register_parameter("weight_g", torch::norm_except_dim(v, 2, 0));
  weight_v = register_parameter("weight_v", v);
  bias = register_parameter("bias", torch::zeros({out}));
}

torch::Tensor WeightNormLinearImpl::forward(const torch::Tensor& x) {
  if (packed_.packed()) return packed_.forward(x);
  return kernels::linear(x, normalised_.get({weight_g, weight_v}, [&] { return weight(); }), bias);
}

ConvTBCImpl::ConvTBCImpl(int64_t in, int64_t out, int64_t kernel_size, double dropout) : kernel_size_(kernel_size) {
  const double std = std::sqrt(4.0 * (1.0 - dropout) / static_cast<double>(kernel_size * in));
  auto v = torch::randn({kernel_size, in, out}) * std;
  weight_g = register_parameter("weight_g", torch::norm_except_dim(v, 2, 2));
  weight_v = register_parameter("weight_v", v);
  bias = register_parameter("bias", torch::zeros({out}));
}

torch::Tensor ConvTBCImpl::forward(const torch::Tensor& x, int64_t padding_l, int64_t padding_r) {
  // The products of step(), over every window of the padded sequence: with packed weights, and at
  // inference on the CPU, where each window's sum then runs in one order whatever the batch
  // (ATen's conv_tbc makes one BLAS product per tap over all the batch's positions).
  if (packed_.packed() || fixed_order_inference(x)) {
    auto padded = torch::constant_pad_nd(x, {0, 0, 0, 0, padding_l, padding_r}).transpose(0, 1);  // [B, T', Cin]
    return window_products(padded).transpose(0, 1);
  }
  auto w = weight_norm(weight_v, weight_g, 2);
  if (padding_l == padding_r) return ConvTBCFunction::apply(x.contiguous(), w, bias, padding_l);
  return ConvTBCFunction::apply(torch::constant_pad_nd(x, {0, 0, 0, 0, padding_l, padding_r}).contiguous(), w, bias, 0);
}

torch::Tensor ConvTBCImpl::linearized_weight() {
  // [K, Cin, Cout] -> [Cout, K, Cin] -> [Cout, K * Cin]: row o holds the taps oldest first.
  return linearized_.get({weight_g, weight_v}, [&] {
    return weight_norm(weight_v, weight_g, 2).permute({2, 0, 1}).reshape({weight_v.size(2), -1});
  });
}

torch::Tensor ConvTBCImpl::step(const torch::Tensor& x, ConvWindowCache& cache) {
  const int64_t B = x.size(0), C = x.size(2), K = kernel_size_;
  if (!cache.window.defined()) cache.window = torch::zeros({B, K - 1, C}, x.options());
  auto full = torch::cat({cache.window, x}, 1);  // [B, K - 1 + n, Cin]
  cache.window = full.narrow(1, x.size(1), K - 1);
  return window_products(full);
}

torch::Tensor ConvTBCImpl::window_products(const torch::Tensor& full) {
  const int64_t B = full.size(0), K = kernel_size_, C = full.size(2), n = full.size(1) - K + 1;
  torch::Tensor rows;
  if (n == 1) {
    rows = full.reshape({B, K * C});
  } else {
    // Window of each position: [B, n, Cin, K] -> [B, n, K, Cin].
    rows = full.unfold(1, K, 1).permute({0, 1, 3, 2}).reshape({B * n, K * C});
  }
  if (packed_.packed()) return packed_.forward(rows).view({B, n, -1});
  return kernels::linear(rows, linearized_weight(), bias).view({B, n, -1});
}

void ConvTBCImpl::set_compute_type(kernels::ComputeType type) {
  torch::NoGradGuard no_grad;
  packed_.pack(linearized_weight(), bias, type);
}

TiedLinearImpl::TiedLinearImpl(const torch::Tensor& tied_weight) {
  weight = register_parameter("weight", tied_weight);
  const double bound = 1.0 / std::sqrt(static_cast<double>(tied_weight.size(1)));
  bias = register_parameter("bias", torch::empty({tied_weight.size(0)}).uniform_(-bound, bound));
}

FConvAttentionImpl::FConvAttentionImpl(int64_t conv_channels, int64_t embed_dim) {
  in_projection = register_module("in_projection", WeightNormLinear(conv_channels, embed_dim));
  out_projection = register_module("out_projection", WeightNormLinear(embed_dim, conv_channels));
}

FConvAttentionResult FConvAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& target_embedding,
                                                 const torch::Tensor& keys, const torch::Tensor& values,
                                                 const torch::Tensor& padding_mask) {
  auto q = (in_projection(x) + target_embedding) * kSqrtHalf;
  auto scores = attention_scores(q, keys);  // [B, T, S]
  const int64_t S = keys.size(1);
  // s * sqrt(1 / s), s = a sentence's real source tokens, computed in double and rounded once as
  // fairseq does without padding, also for a padded batch's rows (fairseq takes float rsqrt
  // there, a last-bit difference), so that a sentence's context is the same bits alone and padded.
  torch::Tensor scale;
  if (padding_mask.defined()) {
    scores = scores.masked_fill(padding_mask.unsqueeze(1), -std::numeric_limits<float>::infinity());
    auto s = (S - padding_mask.sum(1, true).to(torch::kDouble)).unsqueeze(-1);  // [B, 1, 1]
    scale = (s * (1.0 / s).sqrt()).to(x.scalar_type());
  }
  auto attn = attention_softmax(scores);
  auto ctx = attention_context(attn, values);
  ctx = scale.defined() ? ctx * scale : ctx * (static_cast<double>(S) * std::sqrt(1.0 / static_cast<double>(S)));
  return {(out_projection(ctx) + x) * kSqrtHalf, attn};
}

}  // namespace leanseq::nn
