// Training's linear layers with bfloat16 products on the CPU (`train --bf16`, CPU autocast in
// bfloat16): the three products of a layer (its output, its input's gradient and its weight's) on
// bfloat16 operands through oneDNN's matmul, summed in float32, each written in the type it is
// wanted in. Under ATen's autocast a layer's weight gradient came in bfloat16 and was converted to
// float32 (as was the input's gradient of a float32 input): two conversions of each layer's
// backward pass that these products write directly (docs/benchmarks/training.md).
#pragma once
#include <torch/torch.h>

namespace leanseq::kernels {

// Whether oneDNN multiplies bfloat16 here with the CPU's own bfloat16 instructions (its brgemm
// kernels for AVX512_BF16 or AMX), asked once; false in a build without oneDNN, on other CPUs and
// under an ONEDNN_MAX_CPU_ISA below them.
bool bf16_products_native();

// c [m, n] = op(a) op(b) (+ bias [n]) through oneDNN's matmul, op transposing where its flag is
// 'T': a and b contiguous non-empty 2-D bfloat16 CPU tensors of matching sizes, c contiguous
// float32 or bfloat16, bias undefined or a contiguous float32 [n]; sums in float32. On one
// thread the brgemm kernels made for the shape; on more, one matmul made for every size (a
// bfloat16 c rounded from its float32 sums), faster there and nothing made per shape. False,
// writing nothing, for other operands, when bf16_products_native() is false or in a build without
// oneDNN. Counted as a product of `kernels/product_flops.h` (its shape tallied as bfloat16).
bool onednn_bf16_gemm(char ta, char tb, const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c,
                      const torch::Tensor& bias = {});

// x [..., K] (float32 or bfloat16) times weight [N, K] (float32) transposed, plus bias (float32
// [N] or undefined), recorded for autograd, its products as above: x and the weight rounded to
// bfloat16 (to the nearest, as ATen converts), every sum in float32. Returns a bfloat16 [..., N],
// as autocast's linear does; the gradients come in the types of x, the weight and the bias.
// Undefined when the operands are of other types or devices, or bf16_products_native() is false.
torch::Tensor bf16_trained_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace leanseq::kernels
