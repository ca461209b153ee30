// A beam search's candidates: for each sentence, the k best (beam, token) continuations of
// lprobs[g, b, v] + scores[g, b], in one pass that keeps k of them.
//
// ATen's CPU topk over the flattened [sentences, beam * vocabulary] sum first materialises the
// sum, then copies each row into (value, index) pairs and partially sorts them: with an 8000-token
// vocabulary at beam 5 that was a tenth of a transformer's decoding step.
#pragma once
#include <torch/torch.h>

#include <tuple>

namespace leanseq::kernels {

// lprobs [G, beam, V]; scores [G, beam] (undefined: zero). Returns values [G, k] (float32) and
// indices [G, k] (int64, b * V + v), best first, as torch::topk(sum.reshape({G, -1}), k, 1) does;
// among equal values the lower index comes first, and NaN ranks above every number, as in ATen's
// ordering. Float32 CPU tensors with a contiguous last dimension take the loop, others ATen's topk.
std::tuple<torch::Tensor, torch::Tensor> beam_topk(const torch::Tensor& lprobs, const torch::Tensor& scores,
                                                   int64_t k);

// The composite (sum, reshape, torch::topk): the tests' reference.
std::tuple<torch::Tensor, torch::Tensor> beam_topk_reference(const torch::Tensor& lprobs, const torch::Tensor& scores,
                                                             int64_t k);

}  // namespace leanseq::kernels
