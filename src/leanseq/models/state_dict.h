// Loading parameters by name (fairseq state_dict keys) into a module.
#pragma once
#include <torch/torch.h>

#include <map>
#include <string>

namespace leanseq::models {

struct LoadReport {
  int64_t loaded = 0;
  std::vector<std::string> missing;     // the module's names absent from `tensors` (left as they were)
  std::vector<std::string> unexpected;  // names in `tensors` the module does not have (ignored)
};

// Copies `tensors` into the module's parameters and buffers of the same names. Keys that fairseq
// keeps as bookkeeping (*.version, *._float_tensor) are ignored. A shape mismatch throws
// CheckpointError naming the key; with `strict`, so does a missing or unexpected key.
LoadReport load_named_tensors(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& tensors,
                              bool strict, const std::string& origin);

// Parameters with tied tensors listed once (for optimizers and parameter counts).
std::vector<torch::Tensor> unique_parameters(const torch::nn::Module& module);
int64_t count_parameters(const torch::nn::Module& module);

}  // namespace leanseq::models
