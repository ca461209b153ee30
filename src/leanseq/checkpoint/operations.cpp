#include "leanseq/checkpoint/operations.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>

#include "leanseq/checkpoint/classify_config.h"
#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/model.h"
#include "leanseq/checkpoint/run_config.h"
#include "leanseq/core/error.h"
#include "leanseq/models/state_dict.h"

namespace leanseq::checkpoint {

std::vector<std::string> last_checkpoints(const std::string& dir, int64_t n, bool by_updates) {
  const std::regex pattern(by_updates ? "checkpoint_\\d+_(\\d+)\\.pt" : "checkpoint(\\d+)\\.pt");
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::smatch m;
    if (std::regex_match(name, m, pattern)) found.emplace_back(std::stoll(m[1]), e.path().string());
  }
  if (ec) throw DataError(dir + ": cannot list the directory (" + ec.message() + ")");
  if (static_cast<int64_t>(found.size()) < n) {
    throw DataError(dir + ": " + std::to_string(n) + (by_updates ? " update" : " epoch") + " checkpoints asked for, " +
                    std::to_string(found.size()) + " found");
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(found[i].second);
  return out;
}

void average_checkpoints(const std::vector<std::string>& inputs, const std::string& output) {
  if (inputs.empty()) throw ConfigError("average: no checkpoints to average");
  auto base = read_checkpoint(inputs.front());
  auto loaded = load_model(base, inputs.front());
  std::map<std::string, torch::Tensor> sum;
  for (const auto& [k, v] : base.model_tensors) sum[k] = v.to(torch::kDouble);
  for (size_t i = 1; i < inputs.size(); ++i) {
    auto ck = read_checkpoint(inputs[i]);
    if (ck.model_tensors.size() != sum.size()) {
      throw CheckpointError(inputs[i] + ": has " + std::to_string(ck.model_tensors.size()) + " tensors but " +
                            inputs.front() + " has " + std::to_string(sum.size()));
    }
    for (auto& [k, v] : sum) {
      auto it = ck.model_tensors.find(k);
      if (it == ck.model_tensors.end() || !it->second.sizes().equals(v.sizes())) {
        throw CheckpointError(inputs[i] + ": key '" + k + "' is missing or has another shape than in " + inputs.front());
      }
      v += it->second.to(torch::kDouble);
    }
  }
  std::map<std::string, torch::Tensor> avg;
  for (auto& [k, v] : sum) avg[k] = (v / static_cast<double>(inputs.size())).to(base.model_tensors[k].scalar_type());
  models::load_named_tensors(*loaded.model, avg, true, "average");
  save_checkpoint(output, base.config_yaml, base.vocab, base.progress, *loaded.model, nullptr);
}

std::vector<ConfigKey> run_config_keys(const ConfigValues& values) {
  if (is_classifier_config(values)) {
    auto cfg = unchecked_classify_config(values);
    return config_keys(cfg);
  }
  auto cfg = unchecked_run_config(values);
  return config_keys(cfg);
}

const std::map<std::string, kernels::ComputeType>& quantized_storage_types() {
  using kernels::ComputeType;
  static const std::map<std::string, ComputeType> types{{"int8", ComputeType::int8},
                                                        {"bfloat16", ComputeType::bfloat16},
                                                        {"bf16", ComputeType::bfloat16},
                                                        {"float16", ComputeType::float16},
                                                        {"fp16", ComputeType::float16}};
  return types;
}

QuantizeReport quantize_checkpoint(const std::string& input, const std::string& output, kernels::ComputeType type) {
  if (type == kernels::ComputeType::float32) throw ConfigError("quantize: the type must be int8, bfloat16 or float16");
  auto ck = read_checkpoint(input);
  if (is_classifier_config(parse_yaml_text(ck.config_yaml, input + " (config)"))) {
    throw ConfigError(input + ": quantize takes sequence models (a text classifier was given)");
  }
  auto loaded = load_model(ck, input, /*dense=*/true);
  save_checkpoint(output, ck.config_yaml, ck.vocab, ck.progress, *loaded.model, nullptr, type);
  // Against the model's own float32 weights (the input may also hold optimizer state).
  return {std::filesystem::file_size(output), 4 * static_cast<uintmax_t>(models::count_parameters(*loaded.model))};
}

}  // namespace leanseq::checkpoint
