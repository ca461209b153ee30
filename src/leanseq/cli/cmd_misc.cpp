// average, list-archs.
#include <iostream>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/train/checkpoint.h"

namespace leanseq::cli {

void add_average(CLI::App& app, int& exit_code) {
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto output = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("average", "average the parameters of several checkpoints");
  sub->add_option("--inputs", *inputs, "checkpoints to average")->required()->expected(1, -1);
  sub->add_option("--output,-o", *output, "averaged checkpoint")->required();
  sub->callback([inputs, output, &exit_code] {
    auto base = train::read_checkpoint(inputs->front());
    auto loaded = train::load_model(inputs->front());
    std::map<std::string, torch::Tensor> sum;
    for (const auto& [k, v] : base.model_tensors) sum[k] = v.to(torch::kDouble);
    for (size_t i = 1; i < inputs->size(); ++i) {
      auto ck = train::read_checkpoint((*inputs)[i]);
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
    train::save_checkpoint(*output, base.config_yaml, base.vocab, base.progress, *loaded.model, nullptr);
    log::info("averaged " + std::to_string(inputs->size()) + " checkpoints into " + *output);
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
