// A vocabulary shortlist at the output layer: a search that may only produce some target tokens
// computes the logits of those alone, from the output layer's rows for them, gathered (and packed
// in the layer's compute type) once per search.
#pragma once
#include <torch/torch.h>

#include "leanseq/nn/packed_weight.h"

namespace leanseq::nn {

struct OutputRows {
  torch::Tensor ids;  // [V'] int64, ascending, on the model's device
  torch::Tensor weight, bias;
  PackedWeight packed;
  bool gathered = false;
};

// x times the output layer (`weight` [V, C], `bias` [V] or undefined, `packed` its packed copy):
// the logits [..., V] of the whole vocabulary, or [..., V'] of `rows`' ids when rows is given.
// With log_probs, their log_softmax over the last dimension (float32) instead: the same floats as
// kernels::log_softmax of the logits, taken row by row as an int8 layer scales its product back.
torch::Tensor output_logits(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                            const PackedWeight& packed, OutputRows* rows, bool log_probs = false);

}  // namespace leanseq::nn
