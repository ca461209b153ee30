#include "leanseq/models/state_dict.h"

#include <set>

#include "leanseq/core/error.h"

namespace leanseq::models {

namespace {
bool ignored(const std::string& key) {
  auto ends = [&](const std::string& s) { return key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0; };
  return ends(".version") || ends("._float_tensor");
}
std::string shape(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}
}  // namespace

LoadReport load_named_tensors(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& tensors,
                              bool strict, const std::string& origin) {
  torch::NoGradGuard guard;
  std::set<std::string> used;
  LoadReport report;
  auto assign = [&](const std::string& name, torch::Tensor& target) {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      if (strict) throw CheckpointError(origin + ": missing key '" + name + "'");
      report.missing.push_back(name);
      return;
    }
    if (!it->second.sizes().equals(target.sizes())) {
      throw CheckpointError(origin + ": key '" + name + "' has shape " + shape(it->second) + " but the model expects " +
                            shape(target));
    }
    target.copy_(it->second);
    used.insert(name);
    ++report.loaded;
  };
  for (auto& p : module.named_parameters(true)) assign(p.key(), p.value());
  for (auto& b : module.named_buffers(true)) assign(b.key(), b.value());
  for (const auto& [k, v] : tensors) {
    if (used.count(k) || ignored(k)) continue;
    if (strict) throw CheckpointError(origin + ": unexpected key '" + k + "'");
    report.unexpected.push_back(k);
  }
  return report;
}

std::vector<torch::Tensor> unique_parameters(const torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  std::set<const void*> seen;
  for (const auto& p : module.parameters(true)) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) out.push_back(p);
  }
  return out;
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : unique_parameters(module)) n += p.numel();
  return n;
}

}  // namespace leanseq::models
