// fairseq's NAG optimizer (Nesterov's accelerated gradient in Sutskever et al.'s form, the
// optimizer of ConvS2S): with momentum m, learning rate lr and c = lr / (previous lr),
//   p <- p (1 - lr wd) + m^2 c buf - (1 + m) lr g;   buf <- m c buf - lr g.
// Options and momentum buffers are torch::optim::SGD's, so checkpoints store them the same way.
// Contiguous float32 CPU parameters are updated in one pass each (kernels/optimizer_step.h).
#pragma once
#include <torch/torch.h>

#include "leanseq/train/optimizer_state.h"

namespace leanseq::train {

// With GradientFactor: the trainer's normalisation of the gradients happens inside the update.
class NAG : public torch::optim::SGD, public GradientFactor {
 public:
  NAG(std::vector<torch::Tensor> params, double lr, double momentum, double weight_decay);
  torch::Tensor step(LossClosure closure = nullptr) override;

 private:
  double lr_old_ = -1;  // the learning rate of the previous step (-1: none yet)
};

}  // namespace leanseq::train
