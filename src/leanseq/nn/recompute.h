// Activation recomputation ("gradient checkpointing"; LibTorch 1.13 has no utility for it): runs
// a block without keeping its intermediate activations and runs it again in the backward pass.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace leanseq::nn {

using BlockFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// Returns fn(inputs). When autograd would record it (grad mode on and an input requiring a
// gradient), only `inputs` are kept: the backward pass replays fn with the random generator
// state of the forward pass (same dropout masks) and `module`'s buffers as they were before it
// (BatchNorm statistics are updated once), then back-propagates through the replay. Gradients
// reach the inputs and accumulate in the parameters fn uses, as with a plain call. Otherwise a
// plain call. fn must use only parameters of `module` and the CPU generator's randomness (or the
// current CUDA device's, for CUDA inputs).
torch::Tensor recompute(torch::nn::Module& module, const BlockFn& fn, const std::vector<torch::Tensor>& inputs);

}  // namespace leanseq::nn
