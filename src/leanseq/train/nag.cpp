#include "leanseq/train/nag.h"

#include <sstream>
#include <type_traits>

namespace leanseq::train {

namespace {
// The key of a parameter in torch::optim's state map: its TensorImpl's address, printed in
// LibTorch 1.x (as the base class's save and load expect) and the pointer itself in 2.x.
template <class Key>
Key state_key(void* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << impl;
    return s.str();
  } else {
    return impl;
  }
}
}  // namespace

NAG::NAG(std::vector<torch::Tensor> params, double lr, double momentum, double weight_decay)
    : torch::optim::SGD(std::move(params), torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay)) {}

torch::Tensor NAG::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    auto& o = static_cast<torch::optim::SGDOptions&>(group.options());
    const double lr = o.lr(), m = o.momentum(), wd = o.weight_decay();
    const double correct = lr_old_ > 0 ? lr / lr_old_ : 1.0;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto& g = p.grad();
      auto key = state_key<std::decay_t<decltype(state_)>::key_type>(p.unsafeGetTensorImpl());
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto st = std::make_unique<torch::optim::SGDParamState>();
        st->momentum_buffer(torch::zeros_like(p));
        it = state_.emplace(key, std::move(st)).first;
      }
      auto& buf = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
      if (wd != 0) p.mul_(1 - lr * wd);
      p.add_(buf, m * m * correct);
      p.add_(g, -(1 + m) * lr);
      buf.mul_(m * correct).add_(g, -lr);
    }
    lr_old_ = lr;
  }
  return loss;
}

}  // namespace leanseq::train
