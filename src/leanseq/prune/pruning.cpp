#include "leanseq/prune/pruning.h"

#include <cstdio>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/model.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/eval/bleu.h"
#include "leanseq/eval/chrf.h"
#include "leanseq/nn/targeted_dropout.h"
#include "leanseq/runtime/classifier.h"
#include "leanseq/runtime/inference.h"

namespace leanseq::prune {

namespace {
// A copy of a run's config that records the pruning and evaluates exactly the asked sparsity.
template <class Config>
Config pruned_config(Config cfg, const std::string& method, double sparsity) {
  cfg.pruned_method = method;
  cfg.pruned_sparsity = sparsity;
  cfg.td.eval_prune = false;
  return cfg;
}
}  // namespace

double write_pruned_checkpoint(const std::string& checkpoint, const std::string& out, const std::string& method,
                               double sparsity) {
  const auto ck = checkpoint::read_checkpoint(checkpoint);
  const auto progress = ck.progress;
  const auto values = parse_yaml_text(ck.config_yaml, checkpoint + " (config)");
  if (checkpoint::is_classifier_config(values)) {
    auto loaded = runtime::load_classifier(checkpoint, /*dense=*/true);
    const auto zeros = nn::prune_in_place(*loaded.model, method, sparsity);
    auto cfg = pruned_config(checkpoint::resolve_classify_config(values), method, sparsity);
    checkpoint::save_checkpoint(out, dump_config_yaml(cfg), checkpoint::classifier_vocab(loaded.dict, loaded.labels), progress, *loaded.model,
                    nullptr);
    return zeros;
  }
  auto loaded = checkpoint::load_model(ck, checkpoint, /*dense=*/true);
  const auto zeros = nn::prune_in_place(*loaded.model, method, sparsity);
  auto cfg = pruned_config(checkpoint::training_config(ck, checkpoint), method, sparsity);
  checkpoint::save_checkpoint(out, checkpoint::dump_run_config(cfg), loaded.vocab, progress, *loaded.model, nullptr);
  return zeros;
}

std::vector<PrunePoint> prune_curve(torch::nn::Module& model, const std::vector<double>& sparsities,
                                    const std::string& method, const std::function<Scores()>& score,
                                    const std::string& name) {
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
    p.scores = score();
    char line[256];
    std::snprintf(line, sizeof line, "%s: sparsity %.0f%% (zeros %.2f%%): %s %.2f", name.c_str(), 100 * s,
                  100 * p.zeros, p.scores.front().first.c_str(), p.scores.front().second);
    log::info(line);
    curve.push_back(std::move(p));
  }
  return curve;
}

std::vector<PrunePoint> translation_prune_curve(const std::string& checkpoint, const std::vector<std::string>& sources,
                                                const std::vector<std::string>& refs,
                                                const std::vector<double>& sparsities, const std::string& method,
                                                const decode::TranslateOptions& opt) {
  if (sources.size() != refs.size()) {
    throw DataError("the source file has " + std::to_string(sources.size()) + " lines but the reference has " +
                    std::to_string(refs.size()));
  }
  auto t = runtime::load_translator(checkpoint, /*dense=*/true);
  auto score = [&] {
    auto out = t.translator->translate(sources, opt);
    std::vector<std::string> hyps;
    for (auto& o : out) hyps.push_back(o.empty() ? "" : o[0].text);
    return Scores{{"bleu", eval::corpus_bleu(hyps, {refs}).score}, {"chrf", eval::corpus_chrf(hyps, {refs}).score}};
  };
  return prune_curve(*t.loaded.model, sparsities, method, score, checkpoint);
}

std::vector<PrunePoint> classifier_prune_curve(const std::string& checkpoint, const std::string& tsv,
                                               const std::vector<double>& sparsities, const std::string& method,
                                               int64_t max_sentences) {
  auto loaded = runtime::load_classifier(checkpoint, /*dense=*/true);
  auto ds = data::read_text_tsv(tsv, loaded.pair, std::nullopt);
  if (!ds.labelled) throw DataError(tsv + ": has no label column to score the classifier " + checkpoint + " with");
  const auto data = data::encode_text(ds, loaded.dict, loaded.labels);
  auto score = [&] {
    auto r = runtime::evaluate_classifier(loaded.model, data, loaded.labels, max_sentences);
    return Scores{{"accuracy", 100 * r.accuracy}, {"macro_f1", 100 * r.macro_f1}};
  };
  return prune_curve(*loaded.model, sparsities, method, score, checkpoint);
}

}  // namespace leanseq::prune
