#include "leanseq/train/classification_task.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/data/batching.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/runtime/classifier.h"
#include "leanseq/train/adam.h"
#include "leanseq/train/mixed_precision.h"
#include "leanseq/train/task.h"
#include "leanseq/train/trainer.h"

namespace leanseq::train {

namespace {
class ClassificationTask : public Task {
 public:
  explicit ClassificationTask(checkpoint::ClassifyConfig cfg) : cfg_(std::move(cfg)) {}

  void setup(const checkpoint::Checkpoint* resumed, const std::string& resumed_path) override {
    auto train_ds = data::read_text_tsv(cfg_.train_file, std::nullopt, true);
    auto valid_ds = data::read_text_tsv(cfg_.valid_file, train_ds.pair, true);
    std::optional<data::TextDataset> test_ds;
    if (!cfg_.test_file.empty()) test_ds = data::read_text_tsv(cfg_.test_file, train_ds.pair, true);
    if (resumed) {
      auto saved = checkpoint::resolve_classify_config(parse_yaml_text(resumed->config_yaml, resumed_path + " (config)"));
      cfg_.arch = saved.arch;
      cfg_.model = saved.model;
      checkpoint::read_classifier_vocab(resumed->vocab, resumed_path, dict_, labels_);
    } else {
      dict_ = data::build_word_dictionary(train_ds, cfg_.min_count);
      labels_ = data::collect_labels(train_ds);
      if (labels_.size() < 2) throw DataError(cfg_.train_file + ": only one label (" + labels_[0] + "); need at least 2");
      cfg_.model->pair = train_ds.pair;
      cfg_.model->num_classes = static_cast<int64_t>(labels_.size());
    }
    if (cfg_.model->pair != train_ds.pair) {
      throw DataError(cfg_.train_file + ": the checkpoint's model takes " +
                      (cfg_.model->pair ? "sentence pairs" : "single texts") + " but this file has " +
                      (train_ds.pair ? "pairs" : "single texts"));
    }
    train_ = data::encode_text(train_ds, dict_, labels_);
    valid_ = data::encode_text(valid_ds, dict_, labels_);
    if (test_ds) test_ = data::encode_text(*test_ds, dict_, labels_);
    model_ = models::build_classifier(*cfg_.model, dict_.size());
  }

  torch::nn::Module& model() override { return *model_; }

  std::string describe() const override {
    return "classify: arch " + cfg_.arch + " (" + cfg_.model->summary() + "), " +
           std::to_string(models::count_parameters(*model_)) + " parameters; " + std::to_string(dict_.size()) +
           " words, " + std::to_string(labels_.size()) + " labels; " + std::to_string(train_.first.size()) + " train / " +
           std::to_string(valid_.first.size()) + " valid examples";
  }

  std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params) override {
    return std::make_unique<Adam>(params, cfg_.adam.options(cfg_.lr));
  }

  double learning_rate(const checkpoint::TrainerProgress& p) const override {
    return cfg_.lr * std::pow(cfg_.lr_shrink, static_cast<double>(p.lr_shrinks));
  }

  std::vector<std::vector<int64_t>> train_batches() const override {
    return data::batch_text_by_size(train_, cfg_.max_sentences, cfg_.max_tokens);
  }

  BatchLoss loss(const std::vector<int64_t>& batch, const torch::Device& device, const MixedPrecision& amp) override {
    auto b = data::collate_text(train_, batch).to(device);
    torch::Tensor logits;
    {
      MixedPrecision::Autocast autocast(amp);
      logits = model_->forward(b.tokens, b.tokens2);
    }
    logits = logits.to(torch::kFloat);
    auto loss = torch::nn::functional::cross_entropy(
        logits, b.labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    const double correct = logits.argmax(1).eq(b.labels).sum().item<double>();
    return {loss, static_cast<double>(b.ids.size()), {loss.item<double>(), correct}};
  }

  size_t sum_count() const override { return 2; }  // cross-entropy (nats), correct predictions

  std::vector<Stat> train_stats(const std::vector<double>& sums, double weight) const override {
    return {{"loss", "loss", sums[0] / weight, 4}, {"accuracy", "accuracy", sums[1] / weight, 4}};
  }
  std::string weight_unit() const override { return "examples"; }

  // Every rank scores the whole valid set with the same weights: the same answer, no collective.
  Validation validate(const torch::Device& device, Distributed* dist) override {
    (void)dist;
    auto r = runtime::evaluate_classifier(model_, valid_, labels_, std::max<int64_t>(cfg_.max_sentences, 64), device);
    Validation v;
    v.loss = r.loss;
    v.metric = r.accuracy;
    v.stats = {{"accuracy", "accuracy", r.accuracy, 4}, {"loss", "loss", r.loss, 4}, {"macro_f1", "macro F1", r.macro_f1, 4}};
    return v;
  }
  std::string metric_name() const override { return "accuracy"; }
  bool higher_is_better() const override { return true; }

  void after_validation(const Validation& v, bool better, bool epoch_end, checkpoint::TrainerProgress& progress) override {
    (void)v, (void)epoch_end;
    if (!better && cfg_.lr_shrink < 1) ++progress.lr_shrinks;
  }

  std::string config_yaml() override { return dump_config_yaml(cfg_); }
  checkpoint::VocabFiles vocab() const override { return checkpoint::classifier_vocab(dict_, labels_); }

  void finish(const std::string& save_dir, const torch::Device& device) override {
    const std::string best = save_dir + "/checkpoint_best.pt";
    if (!test_ || !io::file_exists(best)) return;
    models::load_named_tensors(*model_, checkpoint::read_checkpoint(best, device).model_tensors, true, best);
    nn::prune_as_evaluated(*model_, cfg_.td);
    test_report = runtime::evaluate_classifier(model_, *test_, labels_, 64, device);
    io::atomic_write_text(save_dir + "/test_report.json", test_report->json());
    log::info("test (" + cfg_.test_file + ", checkpoint_best): " + test_report->text().substr(0, test_report->text().find('\n')));
  }

  std::optional<eval::ClassifyReport> test_report;

 private:
  checkpoint::ClassifyConfig cfg_;
  data::Dictionary dict_;
  std::vector<std::string> labels_;
  data::EncodedText train_, valid_;
  std::optional<data::EncodedText> test_;
  models::SentenceClassifier model_{nullptr};
};
}  // namespace

ClassifyOutcome train_classifier(checkpoint::ClassifyConfig cfg, bool resume) {
  const checkpoint::TrainLoopOptions options = cfg;
  auto owned = std::make_unique<ClassificationTask>(std::move(cfg));
  auto& task = *owned;
  Trainer trainer(std::move(owned), options, resume);
  const auto t = trainer.run();
  ClassifyOutcome out;
  out.signal = t.signal;
  out.num_updates = t.num_updates;
  out.epochs_done = t.epochs_done;
  out.best_valid_accuracy = std::isnan(t.best_metric) ? 0.0 : t.best_metric;
  out.train_seconds = t.train_seconds;
  out.examples_per_second = t.train_tokens_per_second;
  out.test = task.test_report;
  return out;
}

}  // namespace leanseq::train
