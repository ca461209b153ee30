#include "leanseq/nn/recompute.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <mutex>

namespace leanseq::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Generator generator_for(const torch::Device& device) {
  return device.is_cuda() ? at::globalContext().defaultGenerator(device) : at::detail::getDefaultCPUGenerator();
}

torch::Tensor generator_state(at::Generator& gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(at::Generator& gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// What the backward pass needs besides the saved inputs.
struct Replay : torch::CustomClassHolder {
  torch::nn::Module* module = nullptr;
  BlockFn fn;
  torch::Device device{torch::kCPU};
  torch::Tensor rng_state;
  std::vector<torch::Tensor> buffers;  // the module's buffers before the forward pass
};

struct RecomputeFunction : torch::autograd::Function<RecomputeFunction> {
  static torch::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<Replay> replay, torch::TensorList inputs) {
    auto gen = generator_for(replay->device);
    replay->rng_state = generator_state(gen);
    for (const auto& b : replay->module->buffers()) replay->buffers.push_back(b.clone());
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["replay"] = c10::IValue::make_capsule(replay);
    torch::NoGradGuard no_grad;
    return replay->fn(inputs.vec());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto replay = c10::static_intrusive_pointer_cast<Replay>(ctx->saved_data["replay"].toCapsule());
    auto saved = ctx->get_saved_variables();
    std::vector<torch::Tensor> inputs;
    for (const auto& t : saved) inputs.push_back(t.detach().requires_grad_(t.requires_grad()));

    auto gen = generator_for(replay->device);
    auto rng_now = generator_state(gen);
    auto buffers = replay->module->buffers();
    std::vector<torch::Tensor> buffers_now;
    for (const auto& b : buffers) buffers_now.push_back(b.clone());
    torch::Tensor out;
    {
      torch::NoGradGuard g;
      for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(replay->buffers[i]);
    }
    set_generator_state(gen, replay->rng_state);
    {
      torch::AutoGradMode grad_on(true);
      out = replay->fn(inputs);
    }
    set_generator_state(gen, rng_now);
    torch::autograd::backward({out}, {grad_out[0]});
    {
      // After the backward pass: BatchNorm saves its running statistics for it.
      torch::NoGradGuard g;
      for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(buffers_now[i]);
    }

    variable_list grads{torch::Tensor()};  // the Replay argument
    for (const auto& x : inputs) grads.push_back(x.requires_grad() ? x.grad() : torch::Tensor());
    return grads;
  }
};

}  // namespace

torch::Tensor recompute(torch::nn::Module& module, const BlockFn& fn, const std::vector<torch::Tensor>& inputs) {
  bool records = torch::GradMode::is_enabled();
  bool any_grad = false;
  for (const auto& x : inputs) any_grad = any_grad || x.requires_grad();
  if (!records || !any_grad || inputs.empty()) return fn(inputs);
  auto replay = c10::make_intrusive<Replay>();
  replay->module = &module;
  replay->fn = fn;
  replay->device = inputs.front().device();
  return RecomputeFunction::apply(replay, torch::TensorList(inputs));
}

}  // namespace leanseq::nn
