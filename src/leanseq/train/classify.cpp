#include "leanseq/train/classify.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/threads.h"
#include "leanseq/core/timer.h"
#include "leanseq/data/batching.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/train/checkpoint.h"
#include "leanseq/train/run_config.h"
#include "leanseq/train/signals.h"

namespace leanseq::train {

void ClassifyConfig::visit(ConfigVisitor& v) {
  v.field("task", task, "classify (text classification) or seq2seq");
  v.field("arch", arch, "classifier preset (leanseq list-archs: family classifier)");
  v.field("data.train", train_file, "training TSV: text<TAB>label, or text1<TAB>text2<TAB>label for pairs");
  v.field("data.valid", valid_file, "validation TSV (same columns)");
  v.field("data.test", test_file, "test TSV, scored with checkpoint_best after training (optional)");
  v.field("data.min_count", min_count, "words seen fewer times in training become <unk>");
  v.field("save_dir", save_dir, "where checkpoints and the training log go");
  v.field("seed", seed, "random seed");
  v.field("threads", threads, kComputeThreadsHelp);
  v.field("device", device, "cpu, cuda or cuda:N");
  if (model) {
    PrefixedVisitor pv("model", v);
    model->visit(pv);
  }
  v.field("optim.lr", lr, "Adam learning rate");
  v.field("optim.adam_beta1", adam_beta1, "Adam beta1");
  v.field("optim.adam_beta2", adam_beta2, "Adam beta2");
  v.field("optim.adam_eps", adam_eps, "Adam epsilon");
  v.field("optim.weight_decay", weight_decay, "L2 weight decay");
  v.field("optim.clip_norm", clip_norm, "clip the global gradient norm (0: off)");
  v.field("optim.lr_shrink", lr_shrink, "multiply the LR by this after a validation without improvement (1: never)");
  v.field("batch.max_sentences", max_sentences, "examples per batch");
  v.field("batch.max_tokens", max_tokens, "padded tokens per batch (0: no limit)");
  v.field("stop.max_epoch", max_epoch, "stop after N epochs (0: no limit)");
  v.field("stop.max_update", max_update, "stop after N updates (0: no limit)");
  v.field("stop.max_minutes", max_minutes, "stop after N minutes of wall-clock time (0: no limit)");
  v.field("stop.patience", patience, "stop after N validations without a better accuracy (0: never)");
  v.field("log.interval", log_interval, "log every N updates");
  v.field("valid.interval_updates", validate_interval_updates, "also validate every N updates (0: per epoch only)");
  td.visit(v, "td.");
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
  if (log_interval < 1) bad("log.interval must be positive");
  if (max_epoch == 0 && max_update == 0 && max_minutes == 0 && patience == 0) {
    bad("stop: set stop.max_epoch, stop.max_update, stop.max_minutes or stop.patience");
  }
  check_device_name(device);
  model->validate();
  td.validate();
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

// ---------------------------------------------------------------------------------------------
// Scores

ClassifyReport score_predictions(const std::vector<int64_t>& gold, const std::vector<int64_t>& predicted,
                                 const std::vector<std::string>& labels) {
  const auto n = labels.size();
  ClassifyReport r;
  r.examples = static_cast<int64_t>(gold.size());
  r.confusion.assign(n, std::vector<int64_t>(n, 0));
  for (size_t i = 0; i < gold.size(); ++i) {
    r.confusion[static_cast<size_t>(gold[i])][static_cast<size_t>(predicted[i])]++;
    r.correct += gold[i] == predicted[i];
  }
  r.accuracy = r.examples ? static_cast<double>(r.correct) / static_cast<double>(r.examples) : 0.0;
  for (size_t c = 0; c < n; ++c) {
    ClassScores s;
    s.label = labels[c];
    int64_t predicted_c = 0;
    for (size_t g = 0; g < n; ++g) predicted_c += r.confusion[g][c];
    for (size_t p = 0; p < n; ++p) s.support += r.confusion[c][p];
    const auto tp = static_cast<double>(r.confusion[c][c]);
    s.precision = predicted_c ? tp / static_cast<double>(predicted_c) : 0.0;
    s.recall = s.support ? tp / static_cast<double>(s.support) : 0.0;
    s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0.0;
    r.macro_f1 += s.f1 / static_cast<double>(n);
    r.classes.push_back(s);
  }
  return r;
}

std::string ClassifyReport::json() const {
  nlohmann::json j;
  j["examples"] = examples;
  j["correct"] = correct;
  j["accuracy"] = accuracy;
  j["macro_f1"] = macro_f1;
  if (loss >= 0) j["loss"] = loss;
  auto& cls = j["classes"] = nlohmann::json::array();
  for (const auto& c : classes) {
    cls.push_back({{"label", c.label}, {"precision", c.precision}, {"recall", c.recall}, {"f1", c.f1}, {"support", c.support}});
  }
  j["confusion"] = confusion;
  return j.dump(2) + "\n";
}

std::string ClassifyReport::text() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "accuracy %.2f%% (%lld/%lld), macro F1 %.2f\n", 100 * accuracy,
                static_cast<long long>(correct), static_cast<long long>(examples), 100 * macro_f1);
  std::string out = buf;
  for (const auto& c : classes) {
    std::snprintf(buf, sizeof buf, "  label %-12s precision %6.2f  recall %6.2f  F1 %6.2f  support %lld\n",
                  c.label.c_str(), 100 * c.precision, 100 * c.recall, 100 * c.f1, static_cast<long long>(c.support));
    out += buf;
  }
  return out;
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

ClassifyReport evaluate_classifier(models::SentenceClassifier& model, const data::EncodedText& data,
                                   const std::vector<std::string>& labels, int64_t max_sentences,
                                   const torch::Device& device) {
  auto probs = predict_probabilities(model, data, max_sentences, device);
  auto pred = probs.argmax(1);
  std::vector<int64_t> predicted(pred.data_ptr<int64_t>(), pred.data_ptr<int64_t>() + pred.numel());
  auto report = score_predictions(data.labels, predicted, labels);
  auto gold = torch::tensor(data.labels, torch::kLong);
  report.loss = -probs.gather(1, gold.unsqueeze(1)).clamp_min(1e-12).log().mean().item<double>();
  return report;
}

// ---------------------------------------------------------------------------------------------
// Training

VocabFiles classifier_vocab(const data::Dictionary& dict, const std::vector<std::string>& labels) {
  VocabFiles v;
  v.src_lang = "text", v.tgt_lang = "label";
  v.src_dict = dict.to_text();
  for (const auto& l : labels) v.tgt_dict += l + "\n";
  return v;
}

namespace {
// The word dictionary and labels a classifier checkpoint `path` stores (classifier_vocab's inverse).
void read_stored_vocab(const VocabFiles& v, const std::string& path, data::Dictionary& dict,
                       std::vector<std::string>& labels) {
  dict = data::Dictionary::parse(v.src_dict, path + " (dictionary)");
  labels = io::split_lines(v.tgt_dict, path + " (labels)");
}

struct ClassifyRun {
  ClassifyConfig cfg;
  torch::Device device{torch::kCPU};
  data::Dictionary dict;
  std::vector<std::string> labels;
  data::EncodedText train, valid;
  std::optional<data::EncodedText> test;
  models::SentenceClassifier model{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
  std::unique_ptr<nn::TargetedDropout> td;  // td.type != none
  TrainerProgress progress;
  Timer timer;
  std::ofstream log_file;

  double elapsed() const { return progress.elapsed_seconds + timer.seconds(); }

  void save(const std::string& name) {
    progress.elapsed_seconds = elapsed();
    timer.reset();
    save_checkpoint(cfg.save_dir + "/" + name, dump_config_yaml(cfg), classifier_vocab(dict, labels), progress, *model,
                    optimizer.get());
  }

  void setup(bool resume) {
    leanseq::set_compute_threads(static_cast<int>(cfg.threads));
    device = resolve_device(cfg.device, "device");
    auto train_ds = data::read_text_tsv(cfg.train_file, std::nullopt, true);
    auto valid_ds = data::read_text_tsv(cfg.valid_file, train_ds.pair, true);
    std::optional<data::TextDataset> test_ds;
    if (!cfg.test_file.empty()) test_ds = data::read_text_tsv(cfg.test_file, train_ds.pair, true);

    io::make_dirs(cfg.save_dir);
    const std::string last = cfg.save_dir + "/checkpoint_last.pt";
    std::optional<Checkpoint> ck;
    if (resume && io::file_exists(last)) {
      ck = read_checkpoint(last, device);
      auto saved = resolve_classify_config(parse_yaml_text(ck->config_yaml, last + " (config)"));
      cfg.arch = saved.arch;
      cfg.model = saved.model;
      read_stored_vocab(ck->vocab, last, dict, labels);
      progress = ck->progress;
    } else {
      dict = data::build_word_dictionary(train_ds, cfg.min_count);
      labels = data::collect_labels(train_ds);
      if (labels.size() < 2) throw DataError(cfg.train_file + ": only one label (" + labels[0] + "); need at least 2");
      cfg.model->pair = train_ds.pair;
      cfg.model->num_classes = static_cast<int64_t>(labels.size());
    }
    if (cfg.model->pair != train_ds.pair) {
      throw DataError(cfg.train_file + ": the checkpoint's model takes " + (cfg.model->pair ? "sentence pairs" : "single texts") +
                      " but this file has " + (train_ds.pair ? "pairs" : "single texts"));
    }
    train = data::encode_text(train_ds, dict, labels);
    valid = data::encode_text(valid_ds, dict, labels);
    if (test_ds) test = data::encode_text(*test_ds, dict, labels);

    torch::manual_seed(static_cast<uint64_t>(cfg.seed));
    model = models::build_classifier(*cfg.model, dict.size());
    model->to(device);
    torch::optim::AdamOptions ao(cfg.lr);
    ao.betas({cfg.adam_beta1, cfg.adam_beta2}).eps(cfg.adam_eps).weight_decay(cfg.weight_decay);
    optimizer = std::make_unique<torch::optim::Adam>(model->parameters(), ao);
    if (ck) {
      models::load_named_tensors(*model, ck->model_tensors, true, last);
      if (ck->optimizer) optimizer->load(*ck->optimizer);
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(ck->rng_state);
      log::info("resumed from " + last + " at epoch " + std::to_string(progress.epoch) + ", update " +
                std::to_string(progress.num_updates));
    }
    set_lr(cfg.lr * std::pow(cfg.lr_shrink, static_cast<double>(progress.lr_shrinks)));
    if (cfg.td.enabled()) {
      td = std::make_unique<nn::TargetedDropout>(cfg.td, *model);
      log::info("targeted dropout: " + cfg.td.summary());
    }
    log_file.open(cfg.save_dir + "/train_log.jsonl", std::ios::app);
    int64_t params = 0;
    for (const auto& p : model->parameters()) params += p.numel();
    log::info("classify: arch " + cfg.arch + " (" + cfg.model->summary() + "), " + std::to_string(params) +
              " parameters; " + std::to_string(dict.size()) + " words, " + std::to_string(labels.size()) + " labels; " +
              std::to_string(train.first.size()) + " train / " + std::to_string(valid.first.size()) + " valid examples");
  }

  void set_lr(double lr) {
    for (auto& g : optimizer->param_groups()) static_cast<torch::optim::AdamOptions&>(g.options()).lr(lr);
  }
  double current_lr() {
    return static_cast<torch::optim::AdamOptions&>(optimizer->param_groups()[0].options()).lr();
  }

  bool max_update_reached() const { return cfg.max_update > 0 && progress.num_updates >= cfg.max_update; }
  bool max_minutes_reached() const { return cfg.max_minutes > 0 && elapsed() >= cfg.max_minutes * 60.0; }

  // Validates, keeps the best checkpoint and applies the patience and LR-shrink rules. Returns
  // whether patience ran out.
  bool validate_and_save(double train_loss) {
    ClassifyReport report;
    {
      nn::ScopedEvalPrune pruned(td.get());
      report = evaluate_classifier(model, valid, labels, std::max<int64_t>(cfg.max_sentences, 64), device);
    }
    const bool better = std::isnan(progress.best_metric) || report.accuracy > progress.best_metric;
    if (better) {
      progress.best_metric = report.accuracy;
      progress.validations_since_best = 0;
    } else {
      progress.validations_since_best++;
      if (cfg.lr_shrink < 1) {
        progress.lr_shrinks++;
        set_lr(cfg.lr * std::pow(cfg.lr_shrink, static_cast<double>(progress.lr_shrinks)));
      }
    }
    char buf[200];
    std::snprintf(buf, sizeof buf, "valid: epoch %lld update %lld: accuracy %.2f%% loss %.4f (best %.2f%%)",
                  static_cast<long long>(progress.epoch), static_cast<long long>(progress.num_updates),
                  100 * report.accuracy, report.loss, 100 * progress.best_metric);
    log::info(buf);
    nlohmann::json j{{"epoch", progress.epoch},         {"updates", progress.num_updates},
                     {"valid_accuracy", report.accuracy}, {"valid_loss", report.loss},
                     {"train_loss", train_loss},         {"lr", current_lr()},
                     {"elapsed_seconds", elapsed()}};
    log_file << j.dump() << "\n" << std::flush;
    if (better) save("checkpoint_best.pt");
    return cfg.patience > 0 && progress.validations_since_best >= cfg.patience;
  }

  ClassifyOutcome run() {
    ClassifyOutcome out;
    install_stop_handlers();
    model->train();
    Timer train_timer;
    int64_t examples_seen = 0;
    double log_loss = 0, log_correct = 0, log_n = 0, interval_loss = 0, interval_n = 0;
    int64_t last_validated = -1;
    auto validate_now = [&] {
      last_validated = progress.num_updates;
      const bool out_of_patience = validate_and_save(interval_loss / std::max(interval_n, 1.0));
      interval_loss = interval_n = 0;
      return out_of_patience;
    };
    bool done = max_update_reached() || max_minutes_reached();
    while (!done) {
      if (cfg.max_epoch > 0 && progress.epoch > cfg.max_epoch) break;
      auto batches = length_batches(train, cfg.max_sentences, cfg.max_tokens);
      data::shuffle_batches(batches, static_cast<uint64_t>(cfg.seed) * 1000003ULL + static_cast<uint64_t>(progress.epoch));
      for (auto i = static_cast<size_t>(progress.batch_in_epoch); i < batches.size(); ++i) {
        auto b = data::collate_text(train, batches[i]).to(device);
        if (td) td->begin_update(progress.num_updates);
        auto logits = model->forward(b.tokens, b.tokens2);
        auto loss = torch::nn::functional::cross_entropy(logits, b.labels);
        optimizer->zero_grad();
        loss.backward();
        if (td) td->end_update();
        if (cfg.clip_norm > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), cfg.clip_norm);
        optimizer->step();
        progress.num_updates++;
        progress.batch_in_epoch = static_cast<int64_t>(i) + 1;
        const auto n = static_cast<double>(b.ids.size());
        const double l = loss.item<double>();
        log_loss += l * n, interval_loss += l * n, log_n += n, interval_n += n;
        log_correct += logits.argmax(1).eq(b.labels).sum().item<double>();
        examples_seen += static_cast<int64_t>(b.ids.size());
        if (progress.num_updates % cfg.log_interval == 0) {
          char buf[200];
          std::snprintf(buf, sizeof buf, "epoch %lld update %lld: loss %.4f accuracy %.2f%% lr %.3g, %.0f examples/s",
                        static_cast<long long>(progress.epoch), static_cast<long long>(progress.num_updates),
                        log_loss / log_n, 100 * log_correct / log_n, current_lr(),
                        static_cast<double>(examples_seen) / std::max(train_timer.seconds(), 1e-9));
          log::info(buf);
          log_loss = log_correct = log_n = 0;
        }
        const int sig = stop_signal();
        if (sig) {
          log::warn("stopping on signal " + std::to_string(sig) + "; saving checkpoint_last.pt");
          save("checkpoint_last.pt");
          out.signal = sig;
          return finish(out, train_timer, examples_seen);
        }
        if (cfg.validate_interval_updates > 0 && progress.num_updates % cfg.validate_interval_updates == 0) {
          done = validate_now();
        }
        if (done || max_update_reached() || max_minutes_reached()) {
          done = true;
          break;
        }
      }
      if (progress.batch_in_epoch >= static_cast<int64_t>(batches.size())) {
        if (last_validated != progress.num_updates && validate_now()) done = true;
        out.epochs_done++;
        progress.epoch++;
        progress.batch_in_epoch = 0;
      } else if (last_validated != progress.num_updates) {
        validate_now();  // stopped inside an epoch: the best checkpoint also judges the last weights
      }
      save("checkpoint_last.pt");
    }
    const std::string best = cfg.save_dir + "/checkpoint_best.pt";
    if (test && io::file_exists(best)) {
      models::load_named_tensors(*model, read_checkpoint(best, device).model_tensors, true, best);
      nn::ScopedEvalPrune pruned(td.get());
      out.test = evaluate_classifier(model, *test, labels, 64, device);
      io::atomic_write_text(cfg.save_dir + "/test_report.json", out.test->json());
      log::info("test (" + cfg.test_file + ", checkpoint_best): " + out.test->text().substr(0, out.test->text().find('\n')));
    }
    return finish(out, train_timer, examples_seen);
  }

  ClassifyOutcome finish(ClassifyOutcome out, const Timer& train_timer, int64_t examples_seen) {
    out.num_updates = progress.num_updates;
    out.best_valid_accuracy = std::isnan(progress.best_metric) ? 0.0 : progress.best_metric;
    out.train_seconds = train_timer.seconds();
    out.examples_per_second = static_cast<double>(examples_seen) / std::max(out.train_seconds, 1e-9);
    return out;
  }
};
}  // namespace

ClassifyOutcome train_classifier(ClassifyConfig cfg, bool resume) {
  ClassifyRun run;
  run.cfg = std::move(cfg);
  run.setup(resume);
  return run.run();
}

LoadedClassifier load_classifier(const std::string& path, bool dense) {
  auto ck = read_checkpoint(path);
  auto values = parse_yaml_text(ck.config_yaml, path + " (config)");
  if (!is_classifier_config(values)) {
    throw CheckpointError(path + ": not a text classifier checkpoint (use leanseq translate for sequence models)");
  }
  LoadedClassifier out;
  out.config = resolve_classify_config(values);
  read_stored_vocab(ck.vocab, path, out.dict, out.labels);
  out.model = models::build_classifier(*out.config.model, out.dict.size());
  models::load_named_tensors(*out.model, ck.model_tensors, true, path);
  if (!dense) nn::prune_as_evaluated(*out.model, out.config.td);
  out.model->eval();
  return out;
}

}  // namespace leanseq::train
