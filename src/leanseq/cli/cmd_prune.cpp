// prune: a magnitude-pruned copy of a trained checkpoint (a sequence model or a text classifier).
#include <cstdio>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/prune/pruning.h"

namespace leanseq::cli {

namespace {
struct PruneArgs {
  std::string checkpoint, output, method = "weight";
  double sparsity = -1;
};
}  // namespace

void add_prune(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<PruneArgs>();
  auto* sub = app.add_subcommand("prune", "write a magnitude-pruned copy of a checkpoint (masked weights zeroed)");
  sub->add_option("--checkpoint", a->checkpoint, "trained checkpoint (translation model or text classifier)")->required();
  sub->add_option("--output,-o", a->output, "the pruned checkpoint to write")->required();
  sub->add_option("--method", a->method, "weight (per output unit, smallest magnitudes) or unit (whole units)")
      ->capture_default_str();
  sub->add_option("--sparsity", a->sparsity, "fraction of each weight (or of the units) to prune, e.g. 0.5")->required();
  sub->callback([a, &exit_code] {
    if (a->method != "weight" && a->method != "unit") throw ConfigError("--method: '" + a->method + "' is not weight or unit");
    if (a->sparsity < 0 || a->sparsity > 1) throw ConfigError("--sparsity must be in [0, 1]");
    const double zeros = prune::write_pruned_checkpoint(a->checkpoint, a->output, a->method, a->sparsity);
    char buf[160];
    std::snprintf(buf, sizeof buf, "wrote %s: %.2f%% of the prunable weights are zero", a->output.c_str(), 100 * zeros);
    log::info(buf);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
