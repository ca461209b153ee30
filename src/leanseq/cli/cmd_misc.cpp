// average, quantize, list-archs.
#include <algorithm>
#include <iostream>

#include "leanseq/checkpoint/operations.h"
#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/models/registry.h"

namespace leanseq::cli {

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
      *inputs = checkpoint::last_checkpoints(*dir, *last > 0 ? *last : *last_updates, *last_updates > 0);
    }
    if (inputs->empty()) throw ConfigError("average: give --inputs, or --dir with --last or --last-updates");
    checkpoint::average_checkpoints(*inputs, *output);
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
  sub->add_option("--output,--out,-o", *output, "quantized checkpoint")->required();
  sub->add_option("--type", *type, "int8, bfloat16 or float16")
      ->transform(CLI::CheckedTransformer(checkpoint::quantized_storage_types()))
      ->default_str("int8");
  sub->callback([checkpoint, output, type, &exit_code] {
    const auto r = checkpoint::quantize_checkpoint(*checkpoint, *output, *type);
    const auto after = r.bytes, weights = r.float32_bytes;
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
