#include "leanseq/train/adam.h"

#include <cmath>

#include "leanseq/kernels/optimizer_step.h"
#include "leanseq/train/optimizer_state.h"

namespace leanseq::train {

torch::Tensor Adam::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure) {  // first: the gradients it computes decide which update applies
    at::AutoGradMode enable(true);
    loss = closure();
  }
  const double factor = take_gradient_factor();
  bool amsgrad = false;
  for (const auto& group : param_groups()) {
    amsgrad = amsgrad || static_cast<const torch::optim::AdamOptions&>(group.options()).amsgrad();
  }
  if (amsgrad || !one_pass_update_applies(param_groups())) {
    scale_gradients(param_groups(), factor);
    torch::optim::Adam::step();
    return loss;
  }
  torch::NoGradGuard no_grad;
  RECORD_FUNCTION("leanseq::adam_update", std::vector<c10::IValue>());
  std::vector<kernels::AdamSpan> spans;
  std::vector<torch::Tensor> written;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    const auto [beta1, beta2] = o.betas();
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& st = find_or_add_state<torch::optim::AdamParamState>(state_, p, [&] {
        auto made = std::make_unique<torch::optim::AdamParamState>();
        made->step(0);
        made->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        made->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        return made;
      });
      // A state loaded from a checkpoint may be laid out otherwise than the parameter.
      if (!st.exp_avg().is_contiguous()) st.exp_avg(st.exp_avg().contiguous());
      if (!st.exp_avg_sq().is_contiguous()) st.exp_avg_sq(st.exp_avg_sq().contiguous());
      TORCH_CHECK(st.exp_avg().scalar_type() == torch::kFloat && st.exp_avg().numel() == p.numel() &&
                      st.exp_avg_sq().scalar_type() == torch::kFloat && st.exp_avg_sq().numel() == p.numel(),
                  "Adam: the state of a parameter of ", p.sizes(), " does not match it");
      st.step(st.step() + 1);
      const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(st.step()));
      const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(st.step()));
      written.insert(written.end(), {p, st.exp_avg(), st.exp_avg_sq()});
      spans.push_back({p.data_ptr<float>(), p.grad().data_ptr<float>(), st.exp_avg().data_ptr<float>(),
                       st.exp_avg_sq().data_ptr<float>(), p.numel(), static_cast<float>(beta1),
                       static_cast<float>(beta2), static_cast<float>(o.weight_decay()),
                       static_cast<float>(o.lr() / bias_correction1),
                       static_cast<float>(1 / std::sqrt(bias_correction2)), static_cast<float>(o.eps()),
                       static_cast<float>(factor)});
    }
  }
  kernels::adam_update(spans);
  mark_modified(written);
  return loss;
}

}  // namespace leanseq::train
