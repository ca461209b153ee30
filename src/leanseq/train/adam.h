// Adam as torch::optim::Adam defines it (options, state, checkpoints: the same), with its update
// done in one pass per parameter (kernels/optimizer_step.h) when the parameters and gradients are
// contiguous float32 CPU tensors and amsgrad is off; otherwise the base class's composite.
#pragma once
#include <torch/torch.h>

#include "leanseq/train/optimizer_state.h"

namespace leanseq::train {

// With GradientFactor: the trainer's normalisation of the gradients happens inside the update.
class Adam : public torch::optim::Adam, public GradientFactor {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace leanseq::train
