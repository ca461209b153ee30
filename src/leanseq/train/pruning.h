// Magnitude pruning of trained sequence models: pruned checkpoints, and the quality-against-
// sparsity curve (`leanseq prune`, `leanseq analyze prune`).
#pragma once
#include <string>
#include <vector>

#include "leanseq/decode/translator.h"

namespace leanseq::train {

// Writes a copy of `checkpoint` with the prunable weights pruned to `sparsity` by `method`
// (weight: per output unit, the smallest magnitudes; unit: whole output units of smallest norm);
// its config records pruned.method/pruned.sparsity and no longer prunes at evaluation. The
// optimizer state is left out. Returns the fraction of prunable weights that are zero.
double write_pruned_checkpoint(const std::string& checkpoint, const std::string& out, const std::string& method,
                               double sparsity);

struct PrunePoint {
  double sparsity = 0;  // asked for
  double zeros = 0;     // fraction of prunable weights that are zero
  double bleu = 0, chrf = 0;
};

// Translates `sources` with the checkpoint's dense weights pruned to each sparsity in turn and
// scores the output against `refs` (detokenized sacreBLEU 13a and chrF2).
std::vector<PrunePoint> prune_curve(const std::string& checkpoint, const std::vector<std::string>& sources,
                                    const std::vector<std::string>& refs, const std::vector<double>& sparsities,
                                    const std::string& method, const decode::TranslateOptions& opt);

}  // namespace leanseq::train
