// log_softmax over the last dimension for a decoding step's logits: [rows, vocabulary] float32 on
// the CPU, three passes over each row while it is in cache (max, sum of exponentials, the result).
// ATen's CPU kernel took a tenth of an int8 transformer step over an 8000-token vocabulary.
#pragma once
#include <torch/torch.h>

namespace leanseq::kernels {

// log_softmax(x, -1) in float32. The loop takes float32 CPU tensors while no gradient is recorded
// and expects finite logits (an output projection's); other tensors go to ATen's log_softmax
// (with a float32 result). A contiguous x that nothing else refers to (moved in, its storage
// shared with no other tensor) is overwritten with the result: a step's logits are [rows,
// vocabulary], megabytes that a fresh result would write once more.
torch::Tensor log_softmax(torch::Tensor x);

// One row of n finite floats: o = x - (max + log(sum(exp(x - max)))), the loop log_softmax runs
// per row (on AVX-512 where the CPU has it); o may be x. For kernels that make a row and take its
// log-probabilities while it is in cache (int8_linear_log_softmax).
void log_softmax_row(const float* x, int64_t n, float* o);

}  // namespace leanseq::kernels
