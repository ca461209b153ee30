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
