// Adam as torch::optim::Adam defines it (options, state, checkpoints: the same), with its update
// done in one pass per parameter (kernels/optimizer_step.h) when the parameters and gradients are
// contiguous float32 CPU tensors and amsgrad is off; otherwise the base class's composite.
#pragma once
#include <torch/torch.h>

namespace leanseq::train {

class Adam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace leanseq::train
