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
#include "leanseq/train/adam.h"
#include "leanseq/train/mixed_precision.h"
#include "leanseq/train/task.h"
#include "leanseq/train/trainer.h"

namespace leanseq::train {

void ClassifyConfig::visit(ConfigVisitor& v) {
  v.field("task", task, "classify (text classification) or seq2seq");
  v.field("arch", arch, "classifier preset (leanseq list-archs: family classifier)");
  v.field("data.train", train_file, "training TSV: text<TAB>label, or text1<TAB>text2<TAB>label for pairs");
  v.field("data.valid", valid_file, "validation TSV (same columns)");
  v.field("data.test", test_file, "test TSV, scored with checkpoint_best after training (optional)");
  v.field("data.min_count", min_count, "words seen fewer times in training become <unk>");
  visit_loop(v);
  if (model) {
    PrefixedVisitor pv("model", v);
    model->visit(pv);
  }
  v.field("optim.lr", lr, "Adam learning rate");
  adam.visit(v, "L2 weight decay");
  v.field("optim.lr_shrink", lr_shrink, "multiply the LR by this after a validation without improvement (1: never)");
  v.field("batch.max_sentences", max_sentences, "examples per batch");
  v.field("batch.max_tokens", max_tokens, "padded tokens per batch (0: no limit)");
  v.field("pruned.method", pruned_method, "set by leanseq prune: weight or unit magnitude pruning");
  v.field("pruned.sparsity", pruned_sparsity, "set by leanseq prune: the fraction of prunable weights set to zero");
}

void ClassifyConfig::validate() const {
  auto bad = [](const std::string& msg) { throw ConfigError(msg); };
  if (task != "classify") bad("task: expected classify, got '" + task + "'");
  if (train_file.empty()) bad("data.train: no training file (a TSV of text<TAB>label lines)");
  if (valid_file.empty()) bad("data.valid: no validation file (a TSV of text<TAB>label lines)");
  if (lr <= 0) bad("optim.lr must be positive");
  if (lr_shrink <= 0 || lr_shrink > 1) bad("optim.lr_shrink must be in (0, 1]");
  if (max_sentences < 1) bad("batch.max_sentences must be positive");
  if (max_tokens < 0) bad("batch.max_tokens must be 0 (no limit) or positive");
  if (min_count < 1) bad("data.min_count must be at least 1");
  if (max_epoch == 0 && max_update == 0 && max_minutes == 0 && patience == 0) {
    bad("stop: set stop.max_epoch, stop.max_update, stop.max_minutes or stop.patience");
  }
  validate_loop();
  model->validate();
}

ClassifyConfig resolve_classify_config(const ConfigValues& values) {
  ClassifyConfig cfg;
  auto it = values.values.find("arch");
  if (it != values.values.end()) cfg.arch = it->second;
  auto base = models::registry().preset_config(cfg.arch);
  cfg.model = std::dynamic_pointer_cast<models::ClassifierConfig>(base);
  if (!cfg.model) {
    throw ConfigError("arch " + cfg.arch + " is a " + base->family() +
                      " sequence model, not a text classifier (classifier archs: disan, disan_small, "
                      "transformer_classifier, lightconv_classifier)");
  }
  apply_config(cfg, values);
  cfg.validate();
  return cfg;
}

namespace {
std::vector<std::vector<int64_t>> length_batches(const data::EncodedText& data, int64_t max_sentences,
                                                 int64_t max_tokens) {
  data::BatchingOptions bo;
  bo.max_sentences = max_sentences;
  bo.max_tokens = max_tokens > 0 ? max_tokens : std::numeric_limits<int64_t>::max() / 4;
  return data::batch_by_size(data.lengths(), bo);
}
}  // namespace

torch::Tensor predict_probabilities(models::SentenceClassifier& model, const data::EncodedText& data,
                                    int64_t max_sentences, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  auto probs = torch::zeros({static_cast<int64_t>(data.first.size()), model->config().num_classes});
  for (const auto& ids : length_batches(data, max_sentences, 0)) {
    auto b = data::collate_text(data, ids).to(device);
    auto p = torch::softmax(model->forward(b.tokens, b.tokens2), -1).cpu();
    probs.index_copy_(0, torch::tensor(ids, torch::kLong), p);
  }
  model->train(was_training);
  return probs;
}

eval::ClassifyReport evaluate_classifier(models::SentenceClassifier& model, const data::EncodedText& data,
                                         const std::vector<std::string>& labels, int64_t max_sentences,
                                         const torch::Device& device) {
  auto probs = predict_probabilities(model, data, max_sentences, device);
  auto pred = probs.argmax(1);
  std::vector<int64_t> predicted(pred.data_ptr<int64_t>(), pred.data_ptr<int64_t>() + pred.numel());
  auto report = eval::score_predictions(data.labels, predicted, labels);
  auto gold = torch::tensor(data.labels, torch::kLong);
  report.loss = -probs.gather(1, gold.unsqueeze(1)).clamp_min(1e-12).log().mean().item<double>();
  return report;
}

VocabFiles classifier_vocab(const data::Dictionary& dict, const std::vector<std::string>& labels) {
  VocabFiles v;
  v.src_lang = "text", v.tgt_lang = "label";
  v.src_dict = dict.to_text();
  for (const auto& l : labels) v.tgt_dict += l + "\n";
  return v;
}

void read_classifier_vocab(const VocabFiles& v, const std::string& path, data::Dictionary& dict,
                           std::vector<std::string>& labels) {
  dict = data::Dictionary::parse(v.src_dict, path + " (dictionary)");
  labels = io::split_lines(v.tgt_dict, path + " (labels)");
}

namespace {
class ClassificationTask : public Task {
 public:
  explicit ClassificationTask(ClassifyConfig cfg) : cfg_(std::move(cfg)) {}

  void setup(const Checkpoint* resumed, const std::string& resumed_path) override {
    auto train_ds = data::read_text_tsv(cfg_.train_file, std::nullopt, true);
    auto valid_ds = data::read_text_tsv(cfg_.valid_file, train_ds.pair, true);
    std::optional<data::TextDataset> test_ds;
    if (!cfg_.test_file.empty()) test_ds = data::read_text_tsv(cfg_.test_file, train_ds.pair, true);
    if (resumed) {
      auto saved = resolve_classify_config(parse_yaml_text(resumed->config_yaml, resumed_path + " (config)"));
      cfg_.arch = saved.arch;
      cfg_.model = saved.model;
      read_classifier_vocab(resumed->vocab, resumed_path, dict_, labels_);
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

  double learning_rate(const TrainerProgress& p) const override {
    return cfg_.lr * std::pow(cfg_.lr_shrink, static_cast<double>(p.lr_shrinks));
  }

  std::vector<std::vector<int64_t>> train_batches() const override {
    return length_batches(train_, cfg_.max_sentences, cfg_.max_tokens);
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
    auto r = evaluate_classifier(model_, valid_, labels_, std::max<int64_t>(cfg_.max_sentences, 64), device);
    Validation v;
    v.loss = r.loss;
    v.metric = r.accuracy;
    v.stats = {{"accuracy", "accuracy", r.accuracy, 4}, {"loss", "loss", r.loss, 4}, {"macro_f1", "macro F1", r.macro_f1, 4}};
    return v;
  }
  std::string metric_name() const override { return "accuracy"; }
  bool higher_is_better() const override { return true; }

  void after_validation(const Validation& v, bool better, bool epoch_end, TrainerProgress& progress) override {
    (void)v, (void)epoch_end;
    if (!better && cfg_.lr_shrink < 1) ++progress.lr_shrinks;
  }

  std::string config_yaml() override { return dump_config_yaml(cfg_); }
  VocabFiles vocab() const override { return classifier_vocab(dict_, labels_); }

  void finish(const std::string& save_dir, const torch::Device& device) override {
    const std::string best = save_dir + "/checkpoint_best.pt";
    if (!test_ || !io::file_exists(best)) return;
    models::load_named_tensors(*model_, read_checkpoint(best, device).model_tensors, true, best);
    nn::prune_as_evaluated(*model_, cfg_.td);
    test_report = evaluate_classifier(model_, *test_, labels_, 64, device);
    io::atomic_write_text(save_dir + "/test_report.json", test_report->json());
    log::info("test (" + cfg_.test_file + ", checkpoint_best): " + test_report->text().substr(0, test_report->text().find('\n')));
  }

  std::optional<eval::ClassifyReport> test_report;

 private:
  ClassifyConfig cfg_;
  data::Dictionary dict_;
  std::vector<std::string> labels_;
  data::EncodedText train_, valid_;
  std::optional<data::EncodedText> test_;
  models::SentenceClassifier model_{nullptr};
};
}  // namespace

ClassifyOutcome train_classifier(ClassifyConfig cfg, bool resume) {
  const TrainLoopOptions options = cfg;
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
