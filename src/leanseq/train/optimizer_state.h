// What the optimizers of train/ (Adam, NAG) share: the key of a parameter in torch::optim's state
// map, and whether a set of parameters can take the one-pass updates of kernels/optimizer_step.h.
#pragma once
#include <sstream>
#include <string>
#include <type_traits>

#include <torch/torch.h>

namespace leanseq::train {

// A parameter's TensorImpl address as torch::optim keys its state: printed in LibTorch 1.x (as the
// base classes' save and load expect), the pointer itself in 2.x.
template <class Key>
Key optimizer_state_key(void* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << impl;
    return s.str();
  } else {
    return impl;
  }
}

// The state of parameter p in an optimizer's state map, made by make() (a unique_ptr to a new
// State) when p has none yet.
template <class State, class Map, class Make>
State& find_or_add_state(Map& states, const torch::Tensor& p, Make&& make) {
  auto key = optimizer_state_key<typename Map::key_type>(p.unsafeGetTensorImpl());
  auto it = states.find(key);
  if (it == states.end()) it = states.emplace(key, make()).first;
  return static_cast<State&>(*it->second);
}

// Starts an update's gradients undefined, as fairseq does (p.grad = None) rather than zeroing them
// as torch::optim's zero_grad does: autograd then hands each parameter its first gradient instead
// of adding it to zeros (no fill, no add), and a parameter that gets none this update is left
// alone by the optimizer.
inline void clear_gradients(const std::vector<torch::Tensor>& params) {
  for (const auto& p : params) p.mutable_grad() = torch::Tensor();  // mutable_grad() is const
}

// An optimizer of train/ that, when asked, multiplies the gradients by a factor inside its own
// update pass: the trainer's division of the summed gradients by the update's weight (fairseq's
// sample_size) without a pass of its own over every gradient. The factor applies to the next
// step() only.
class GradientFactor {
 public:
  virtual ~GradientFactor() = default;
  void multiply_gradients_at_next_step(double factor) { factor_ = factor; }

 protected:
  // This step's factor (1 when none was asked for); the next step's is 1 again.
  double take_gradient_factor() {
    const double f = factor_;
    factor_ = 1;
    return f;
  }
  // For the composite paths: the factor applied to the gradients themselves.
  static void scale_gradients(std::vector<torch::optim::OptimizerParamGroup>& groups, double factor) {
    if (factor == 1) return;
    torch::NoGradGuard no_grad;
    for (auto& group : groups) {
      for (auto& p : group.params()) {
        if (p.grad().defined()) p.mutable_grad().mul_(factor);
      }
    }
  }

 private:
  double factor_ = 1;
};

// True when every parameter with a gradient is a contiguous float32 CPU tensor with a dense,
// contiguous float32 gradient: the case of the one-pass updates.
inline bool one_pass_update_applies(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  for (const auto& group : groups) {
    for (const auto& p : group.params()) {
      const auto& g = p.grad();
      if (!g.defined()) continue;
      if (!p.is_cpu() || p.scalar_type() != torch::kFloat || !p.is_contiguous()) return false;
      if (g.is_sparse() || !g.is_cpu() || g.scalar_type() != torch::kFloat || !g.is_contiguous()) return false;
      if (g.numel() != p.numel()) return false;
    }
  }
  return true;
}

// Marks tensors written through their data pointers as modified, as an in-place ATen operator
// would: caches keyed on a parameter's version (nn::DerivedWeight's normalised weights) see the
// update.
inline void mark_modified(const std::vector<torch::Tensor>& tensors) {
  for (const auto& t : tensors) t.unsafeGetTensorImpl()->bump_version();
}

}  // namespace leanseq::train
