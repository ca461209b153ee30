// The lightweight/dynamic convolution of Wu et al. (2019) behind one entry point, with the three
// implementations of kernels/lightconv_ref.h's semantics:
//
//   y[b, t, c] = sum_k w[b, h(c), t, k] * x[b, t + k - padding_l, c],  h(c) = c / (C / H),
//
// zeros outside [0, T). `weights` are already normalised (softmax over all K taps, DropConnect):
// [H, K] for lightweight convolution (one kernel per head, shared over batch and time) or
// [B, H, T, K] for dynamic convolution (one kernel per position).
#pragma once
#include <torch/torch.h>

#include <string>

#include "leanseq/kernels/lightconv_shape.h"

namespace leanseq::kernels {

enum class LightconvImpl {
  kAuto,    // the fastest correct path for the device, dtype and shape
  kUnfold,  // plain ATen: [B, T, C, K] windows, weighted sum (the reference)
  kBand,    // plain ATen: per (batch, head) a [T, T] band matrix times the input block
  kKernel,  // the dedicated kernel of the device (CPU: kernels/lightconv_cpu.cpp; CUDA: kernels/cuda/)
};

// "auto" | "unfold" | "band" | "kernel"; throws ConfigError naming `key` otherwise.
LightconvImpl parse_lightconv_impl(const std::string& name, const std::string& key);
const char* lightconv_impl_name(LightconvImpl impl);

// x: [B, T, C]; weights: [H, K] or [B, H, T, K]. Differentiable in x and weights on every path.
// kAuto in training on bfloat16 CPU tensors (`train --bf16`) runs the float32 kernel on them
// widened and rounds its result (and the gradients) back to bfloat16.
torch::Tensor lightconv(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l,
                        LightconvImpl impl = LightconvImpl::kAuto);

// The dedicated CPU kernel (float32/float64): a torch::autograd::Function with its own forward and
// backward; rows are split over threads, channel blocks are vectorised, nothing of size K * C is
// materialised.
torch::Tensor lightconv_cpu(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l);

// The CUDA kernel (float32/float64), when leanseq was built with -DLEANSEQ_CUDA=ON; otherwise
// lightconv_cuda_available() is false and lightconv_cuda throws.
bool lightconv_cuda_available();
torch::Tensor lightconv_cuda(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l);

// The shape and weight strides of one call, checked (for the dedicated kernels).
LightconvShape lightconv_shape(const torch::Tensor& x, const torch::Tensor& weights, int64_t padding_l);

}  // namespace leanseq::kernels
