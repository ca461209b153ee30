// average, quantize, list-archs.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <regex>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/model.h"
#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"

namespace leanseq::cli {

namespace {
// The last `n` checkpoints of `dir`: by epoch (checkpoint<E>.pt) or, with `by_updates`, by update
// (checkpoint_<E>_<U>.pt), as fairseq's average_checkpoints.py picks them; newest first.
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
}  // namespace

void add_average(CLI::App& app, int& exit_code) {
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto output = std::make_shared<std::string>();
  auto dir = std::make_shared<std::string>();
  auto last = std::make_shared<int64_t>(0), last_updates = std::make_shared<int64_t>(0);
  auto* sub = app.add_subcommand(
      "average", "average the parameters of several checkpoints (listed, or the last N of a save directory)");
  auto* in = sub->add_option("--inputs", *inputs, "checkpoints to average")->expected(1, -1);
  auto* d = sub->add_option("--dir", *dir, "a save directory to take the last checkpoints from")->excludes(in);
  auto* le = sub->add_option("--last", *last, "the last N epoch checkpoints of --dir (checkpoint<E>.pt)")
                 ->needs(d)
                 ->check(CLI::PositiveNumber);
  sub->add_option("--last-updates", *last_updates,
                  "the last N update checkpoints of --dir (checkpoint_<E>_<U>.pt, checkpoint.save_interval_updates)")
      ->needs(d)
      ->excludes(le)
      ->check(CLI::PositiveNumber);
  sub->add_option("--output,-o", *output, "averaged checkpoint")->required();
  sub->callback([inputs, output, dir, last, last_updates, &exit_code] {
    if (!dir->empty()) {
      if (*last == 0 && *last_updates == 0) throw ConfigError("--dir goes with --last N or --last-updates N");
      *inputs = last_checkpoints(*dir, *last > 0 ? *last : *last_updates, *last_updates > 0);
    }
    if (inputs->empty()) throw ConfigError("average: give --inputs, or --dir with --last or --last-updates");
    auto base = checkpoint::read_checkpoint(inputs->front());
    auto loaded = checkpoint::load_model(base, inputs->front());
    std::map<std::string, torch::Tensor> sum;
    for (const auto& [k, v] : base.model_tensors) sum[k] = v.to(torch::kDouble);
    for (size_t i = 1; i < inputs->size(); ++i) {
      auto ck = checkpoint::read_checkpoint((*inputs)[i]);
      if (ck.model_tensors.size() != sum.size()) {
        throw CheckpointError((*inputs)[i] + ": has " + std::to_string(ck.model_tensors.size()) + " tensors but " +
                              inputs->front() + " has " + std::to_string(sum.size()));
      }
      for (auto& [k, v] : sum) {
        auto it = ck.model_tensors.find(k);
        if (it == ck.model_tensors.end() || !it->second.sizes().equals(v.sizes())) {
          throw CheckpointError((*inputs)[i] + ": key '" + k + "' is missing or has another shape than in " +
                                inputs->front());
        }
        v += it->second.to(torch::kDouble);
      }
    }
    std::map<std::string, torch::Tensor> avg;
    for (auto& [k, v] : sum) avg[k] = (v / static_cast<double>(inputs->size())).to(base.model_tensors[k].scalar_type());
    models::load_named_tensors(*loaded.model, avg, true, "average");
    checkpoint::save_checkpoint(*output, base.config_yaml, base.vocab, base.progress, *loaded.model, nullptr);
    log::info("averaged " + std::to_string(inputs->size()) + " checkpoints into " + *output);
    exit_code = 0;
  });
}

void add_quantize(CLI::App& app, int& exit_code) {
  auto checkpoint = std::make_shared<std::string>(), output = std::make_shared<std::string>();
  auto type = std::make_shared<kernels::ComputeType>(kernels::ComputeType::int8);
  auto* sub = app.add_subcommand(
      "quantize", "store a checkpoint's weights in int8 (a scale per row), bfloat16 or float16, without optimizer state");
  sub->add_option("--checkpoint", *checkpoint, "checkpoint to quantize")->required();
  sub->add_option("--out,-o", *output, "quantized checkpoint")->required();
  sub->add_option("--type", *type, "int8, bfloat16 or float16")
      ->transform(CLI::CheckedTransformer(std::map<std::string, kernels::ComputeType>{
          {"int8", kernels::ComputeType::int8},
          {"bfloat16", kernels::ComputeType::bfloat16},
          {"bf16", kernels::ComputeType::bfloat16},
          {"float16", kernels::ComputeType::float16},
          {"fp16", kernels::ComputeType::float16}}))
      ->default_str("int8");
  sub->callback([checkpoint, output, type, &exit_code] {
    auto ck = checkpoint::read_checkpoint(*checkpoint);
    if (checkpoint::is_classifier_config(parse_yaml_text(ck.config_yaml, *checkpoint + " (config)"))) {
      throw ConfigError(*checkpoint + ": quantize takes sequence models (a text classifier was given)");
    }
    auto loaded = checkpoint::load_model(ck, *checkpoint, /*dense=*/true);
    checkpoint::save_checkpoint(*output, ck.config_yaml, ck.vocab, ck.progress, *loaded.model, nullptr, *type);
    // Against the model's own float32 weights (the input may also hold optimizer state).
    const auto weights = 4 * static_cast<uintmax_t>(models::count_parameters(*loaded.model));
    const auto after = std::filesystem::file_size(*output);
    log::info("wrote " + *output + " (" + kernels::compute_type_name(*type) + " weights): " + std::to_string(after) +
              " bytes, " + std::to_string(100 * after / std::max<uintmax_t>(weights, 1)) + "% of the " +
              std::to_string(weights) + " bytes of its float32 weights");
    exit_code = 0;
  });
}

void add_list_archs(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("list-archs", "model presets: name, family, key dimensions");
  sub->callback([&exit_code] {
    for (const auto& p : models::registry().presets()) {
      auto cfg = models::registry().preset_config(p.name);
      std::cout << p.name << "\t" << p.family << "\t" << cfg->summary() << "\t" << p.description << "\n";
    }
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
