// fairseq's Linear helper: xavier-uniform weight, zero bias.
#pragma once
#include <torch/torch.h>

namespace leanseq::nn {

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias = true, double gain = 1.0);

}  // namespace leanseq::nn
