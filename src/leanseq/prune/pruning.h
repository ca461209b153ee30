// Magnitude pruning of trained models, sequence models and text classifiers alike: pruned
// checkpoints, and the quality-against-sparsity curve (`leanseq prune`, `leanseq analyze prune`).
#pragma once
#include <torch/torch.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "leanseq/decode/translator.h"

namespace leanseq::prune {

// Writes a copy of `checkpoint` (a sequence model or a text classifier) with the prunable weights
// pruned to `sparsity` by `method` (weight: per output unit, the smallest magnitudes; unit: whole
// output units of smallest norm); its config records pruned.method/pruned.sparsity and no longer
// prunes at evaluation. The optimizer state is left out. Returns the fraction of prunable weights
// that are zero.
double write_pruned_checkpoint(const std::string& checkpoint, const std::string& out, const std::string& method,
                               double sparsity);

// Named scores of a model, the first being the one a chart shows (BLEU, accuracy).
using Scores = std::vector<std::pair<std::string, double>>;

struct PrunePoint {
  double sparsity = 0;  // asked for
  double zeros = 0;     // fraction of prunable weights that are zero
  Scores scores;
};

// `model`'s weights as they are now pruned to each sparsity in turn and scored by `score`; the
// model keeps its last pruned weights. `name` labels the log lines.
std::vector<PrunePoint> prune_curve(torch::nn::Module& model, const std::vector<double>& sparsities,
                                    const std::string& method, const std::function<Scores()>& score,
                                    const std::string& name);

// A translation checkpoint's dense weights: `sources` translated and scored against `refs`
// (detokenized sacreBLEU 13a "bleu" and chrF2 "chrf").
std::vector<PrunePoint> translation_prune_curve(const std::string& checkpoint, const std::vector<std::string>& sources,
                                                const std::vector<std::string>& refs,
                                                const std::vector<double>& sparsities, const std::string& method,
                                                const decode::TranslateOptions& opt);

// A classifier checkpoint's dense weights: the labelled TSV file `tsv` classified and scored
// ("accuracy" and "macro_f1", in percent).
std::vector<PrunePoint> classifier_prune_curve(const std::string& checkpoint, const std::string& tsv,
                                               const std::vector<double>& sparsities, const std::string& method,
                                               int64_t max_sentences);

}  // namespace leanseq::prune
