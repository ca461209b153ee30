// Inverted dropout whose mask is drawn on the CPU by a counter-based hash in parallel, instead of
// ATen's serial Bernoulli sampler: dropout of a [140, 14, 14, 128] activation takes 28 ms with ATen's
// and 5.9 ms with this one on the 2-core reference machine (BM_Dropout in bench/micro_bench.cpp). The hash is seeded with one draw from the default CPU generator,
// so torch::manual_seed and generator-state replay (nn/recompute.h) govern it as they govern ATen's.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace leanseq::kernels {

// x with each element zeroed with probability p and the rest scaled by 1 / (1 - p) (when training
// and p > 0); differentiable. CUDA tensors use torch::dropout.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

// The mask's parts, for kernels that drop inside a fused pass (dropout_add_layer_norm.h) and must
// draw the very mask dropout() would: the seed (one draw from the default CPU generator), and the
// multipliers (1 / (1 - p) for a kept element, 0 for a dropped one) of elements [first, first + n)
// of a tensor in row-major order, for 0 < p < 1.
uint64_t dropout_seed();
void dropout_multipliers(uint64_t seed, double p, int64_t first, int64_t n, float* out);

}  // namespace leanseq::kernels
