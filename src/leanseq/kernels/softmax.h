// softmax at inference on the CPU whose rows do not depend on their padding: a row's
// probabilities are the same bits whether or not masked entries (-inf) follow its own, so a
// sentence's attention is the same alone and padded in a batch. ATen's CPU softmax sums a row in
// vector lanes and a scalar tail, and takes the exponential of the tail with another function, so
// its rounding changes with the row's length.
#pragma once
#include <torch/torch.h>

#include <cstdint>

namespace leanseq::kernels {

// x = softmax(x) over n entries (n >= 1): exp(x - max), then times 1 / sum, as ATen computes it.
// Every block of 8 entries (16 where the CPU has AVX-512) takes one compiled vector exponential,
// each value added to its own lane; the last entries make a block with -inf (exp 0), as masked
// pads do, and the lanes are added in a fixed order.
void softmax_row(float* x, int64_t n);

// softmax_row over `count` consecutive rows of n entries each: the same bits. Rows of at most 16
// entries (an attention's few keys) go four at a time where the CPU has AVX-512, their steps
// interleaved.
void softmax_rows(float* x, int64_t n, int64_t count);

// softmax over the last dimension, each row by softmax_row, for a float32 CPU tensor unless
// autograd records it (it requires a gradient while grad mode is on): a new contiguous tensor; an
// undefined tensor otherwise (the caller takes ATen's softmax).
torch::Tensor fixed_order_softmax(const torch::Tensor& x);

}  // namespace leanseq::kernels
