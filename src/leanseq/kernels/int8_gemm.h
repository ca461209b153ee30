// Linear layers in 8-bit integers: weights quantized once per output row (symmetric, int8, a
// float scale per row), activations quantized per row as they arrive, the integer product done by
// oneDNN's u8 x s8 -> s32 GEMM (AVX-512 VNNI where the CPU has it) and scaled back to float32 in
// one pass with the bias. This front end is the only code that sees oneDNN; the reference path
// computes the same quantized product exactly with ATen (in float64), for tests.
#pragma once
#include <torch/torch.h>

namespace leanseq::kernels {

// Whether this build has oneDNN (int8_linear throws otherwise).
bool int8_gemm_available();

// A [N, K] float weight as int8: w[n, k] ~ q[n, k] * scale[n], scale[n] = max_k |w[n, k]| / 127.
struct Int8Weight {
  torch::Tensor q;             // [N, K] int8, contiguous
  torch::Tensor scale;         // [N] float32
  torch::Tensor compensation;  // [N] int32: -128 * sum_k q[n, k], for activations shifted to u8
  int64_t out_features() const { return q.size(0); }
  int64_t in_features() const { return q.size(1); }
};

// Quantizes each output row of a 2-D float weight (an all-zero row gets scale 1).
Int8Weight quantize_weight(const torch::Tensor& weight);
// The same from stored int8 values and scales (a quantized checkpoint).
Int8Weight int8_weight_from(torch::Tensor q, torch::Tensor scale);
// q * scale, as float32 [N, K].
torch::Tensor dequantize(const Int8Weight& w);

// How the activations of int8_linear are quantized: per row, symmetric to [-127, 127], then either
// shifted by 128 to u8 for oneDNN's u8 x s8 product (the shift is undone with the weight's
// compensation: VNNI multiplies u8 by s8 natively) or passed as s8 to its s8 x s8 product.
enum class Int8Activations { u8_shifted, s8 };

// x [..., K] float32 times the weight's transpose, plus `bias` ([N] or undefined): [..., N] float32.
torch::Tensor int8_linear(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias,
                          Int8Activations act = Int8Activations::u8_shifted);
// The same quantization and the integer product in float64 with ATen: the reference.
torch::Tensor int8_linear_reference(const torch::Tensor& x, const Int8Weight& w, const torch::Tensor& bias);

}  // namespace leanseq::kernels
