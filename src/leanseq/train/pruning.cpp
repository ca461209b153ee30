#include "leanseq/train/pruning.h"

#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/eval/bleu.h"
#include "leanseq/eval/chrf.h"
#include "leanseq/nn/targeted_dropout.h"
#include "leanseq/train/checkpoint.h"
#include "leanseq/train/inference.h"

namespace leanseq::train {

double write_pruned_checkpoint(const std::string& checkpoint, const std::string& out, const std::string& method,
                               double sparsity) {
  auto loaded = load_model(checkpoint, /*dense=*/true);
  const auto zeros = nn::prune_in_place(*loaded.model, method, sparsity);
  auto cfg = loaded.config;
  cfg.pruned_method = method;
  cfg.pruned_sparsity = sparsity;
  cfg.td.eval_prune = false;  // exactly the asked sparsity from now on
  save_checkpoint(out, dump_run_config(cfg), loaded.vocab, read_checkpoint(checkpoint).progress, *loaded.model, nullptr);
  return zeros;
}

std::vector<PrunePoint> prune_curve(const std::string& checkpoint, const std::vector<std::string>& sources,
                                    const std::vector<std::string>& refs, const std::vector<double>& sparsities,
                                    const std::string& method, const decode::TranslateOptions& opt) {
  if (sources.size() != refs.size()) {
    throw DataError("the source file has " + std::to_string(sources.size()) + " lines but the reference has " +
                    std::to_string(refs.size()));
  }
  auto t = load_translator(checkpoint, /*dense=*/true);
  auto& model = *t.loaded.model;
  std::vector<torch::Tensor> dense;
  for (const auto& p : model.parameters()) dense.push_back(p.detach().clone());
  std::vector<PrunePoint> curve;
  for (double s : sparsities) {
    {
      torch::NoGradGuard no_grad;
      auto params = model.parameters();
      for (size_t i = 0; i < params.size(); ++i) params[i].copy_(dense[i]);
    }
    PrunePoint p;
    p.sparsity = s;
    p.zeros = nn::prune_in_place(model, method, s);
    auto out = t.translator->translate(sources, opt);
    std::vector<std::string> hyps;
    for (auto& o : out) hyps.push_back(o.empty() ? "" : o[0].text);
    p.bleu = eval::corpus_bleu(hyps, {refs}).score;
    p.chrf = eval::corpus_chrf(hyps, {refs}).score;
    log::info(checkpoint + ": sparsity " + std::to_string(s).substr(0, 4) + " (zeros " +
              std::to_string(100 * p.zeros).substr(0, 5) + "%): BLEU " + std::to_string(p.bleu).substr(0, 5));
    curve.push_back(p);
  }
  return curve;
}

}  // namespace leanseq::train
