#include "leanseq/train/nag.h"

#include "leanseq/kernels/optimizer_step.h"
#include "leanseq/train/optimizer_state.h"

namespace leanseq::train {

NAG::NAG(std::vector<torch::Tensor> params, double lr, double momentum, double weight_decay)
    : torch::optim::SGD(std::move(params), torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay)) {}

torch::Tensor NAG::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable(true);
    loss = closure();
  }
  const double f = take_gradient_factor();  // scales each gradient term below
  const bool one_pass = one_pass_update_applies(param_groups());
  for (auto& group : param_groups()) {
    auto& o = static_cast<torch::optim::SGDOptions&>(group.options());
    const double lr = o.lr(), m = o.momentum(), wd = o.weight_decay();
    const double correct = lr_old_ > 0 ? lr / lr_old_ : 1.0;
    std::vector<kernels::NagSpan> spans;
    std::vector<torch::Tensor> written;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto& g = p.grad();
      auto& buf = find_or_add_state<torch::optim::SGDParamState>(state_, p, [&] {
                    auto made = std::make_unique<torch::optim::SGDParamState>();
                    made->momentum_buffer(torch::zeros_like(p));
                    return made;
                  }).momentum_buffer();
      if (one_pass) {
        if (!buf.is_contiguous()) buf = buf.contiguous();
        TORCH_CHECK(buf.scalar_type() == torch::kFloat && buf.numel() == p.numel(), "NAG: the momentum buffer of a parameter of ",
                    p.sizes(), " does not match it");
        written.insert(written.end(), {p, buf});
        spans.push_back({p.data_ptr<float>(), g.data_ptr<float>(), buf.data_ptr<float>(), p.numel(),
                         static_cast<float>(1 - lr * wd), static_cast<float>(m * m * correct),
                         static_cast<float>(-(1 + m) * lr * f), static_cast<float>(m * correct),
                         static_cast<float>(-lr * f)});
        continue;
      }
      if (wd != 0) p.mul_(1 - lr * wd);
      p.add_(buf, m * m * correct);
      p.add_(g, -(1 + m) * lr * f);
      buf.mul_(m * correct).add_(g, -lr * f);
    }
    if (!spans.empty()) {
      RECORD_FUNCTION("leanseq::nag_update", std::vector<c10::IValue>());
      kernels::nag_update(spans);
      mark_modified(written);
    }
    lr_old_ = lr;
  }
  return loss;
}

}  // namespace leanseq::train
