#include "leanseq/train/translation_task.h"

#include <cmath>
#include <cstdio>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/strings.h"
#include "leanseq/data/batching.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/lm_blocks.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/prepare.h"
#include "leanseq/data/spm.h"
#include "leanseq/decode/translator.h"
#include "leanseq/eval/bleu.h"
#include "leanseq/kernels/label_smoothed_ce.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/runtime/inference.h"
#include "leanseq/text/moses_bpe.h"
#include "leanseq/train/adam.h"
#include "leanseq/train/distributed.h"
#include "leanseq/train/evaluate.h"
#include "leanseq/train/lr_schedule.h"
#include "leanseq/train/mixed_precision.h"
#include "leanseq/train/nag.h"

namespace leanseq::train {

namespace {
constexpr int64_t kPad = data::Dictionary::kPad;
constexpr double kLn2 = 0.69314718055994530942;
}  // namespace

struct TranslationTask::Impl {
  checkpoint::RunConfig cfg;
  data::PreparedMeta meta;
  data::Dictionary src_dict, tgt_dict;
  checkpoint::VocabFiles vocab;
  // The training pairs: one dataset per shard (`data: a:b:c` or a directory prepared with
  // --shard-size), epoch e reading shard (e - 1) mod n; `train` is the current one.
  std::vector<std::unique_ptr<data::PairDataset>> shards;
  std::vector<std::string> shard_prefixes;  // each shard's train.<src>, for messages
  size_t current_shard = SIZE_MAX;
  data::PairDataset* train = nullptr;
  std::unique_ptr<data::PairDataset> valid;
  std::vector<std::pair<int64_t, int64_t>> train_lengths;
  std::shared_ptr<models::Seq2SeqModel> model;
  std::unique_ptr<decode::Translator> translator;  // for validation BLEU

  void read_data() {
    if (cfg.data.empty()) throw ConfigError("train: no data directory (--data DIR, written by leanseq prepare)");
    const auto dirs = colon_separated_paths(cfg.data, "data");
    meta = data::load_prepared(dirs.front());
    src_dict = data::Dictionary::load(meta.src_dict);
    tgt_dict = data::Dictionary::load(meta.tgt_dict);
    vocab.src_lang = meta.src_lang;
    vocab.tgt_lang = meta.tgt_lang;
    vocab.src_dict = io::read_file(meta.src_dict);
    vocab.tgt_dict = io::read_file(meta.tgt_dict);
    read_text_pipeline();
    vocab.joint = meta.joint;
    if (meta.language_model() != cfg.model->language_model()) {
      throw ConfigError(cfg.model->language_model()
                            ? "arch " + cfg.arch + " is a language model; prepare its data with 'leanseq prepare --lm'"
                            : "data " + cfg.data + " is a language-model corpus; arch " + cfg.arch +
                                  " needs parallel data (or use a language-model arch such as lightconv_lm_small)");
    }
    if (meta.language_model() && cfg.eval_bleu) throw ConfigError("valid.bleu: a language model has no BLEU");
    if (cfg.tokens_per_sample > 0 && !meta.language_model()) {
      throw ConfigError("batch.tokens_per_sample: " + cfg.data + " holds translation pairs, not a language model's text");
    }
    // A language-model corpus has one side, read as both source and target (or cut into blocks).
    valid = split_dataset(meta, "valid");
    check_lengths(meta.split_prefix("valid", meta.src_lang), valid->lengths());
    if (dirs.size() > 1 && !meta.shards.empty()) {
      throw ConfigError("data: " + dirs.front() + " holds shards itself; list either it or shard directories");
    }
    for (const auto& dir : dirs.size() == 1 && !meta.shards.empty() ? meta.shards : dirs) {
      const auto m = dir == dirs.front() ? meta : data::load_prepared(dir);
      if (!m.shards.empty()) throw ConfigError("data: " + dir + " holds shards itself; list it alone or its shards");
      if (m.task != meta.task || m.src_lang != meta.src_lang || m.tgt_lang != meta.tgt_lang ||
          io::read_file(m.src_dict) != vocab.src_dict || io::read_file(m.tgt_dict) != vocab.tgt_dict) {
        throw DataError("data: " + dir + " was prepared with other languages or dictionaries than " + dirs.front() +
                        "; every shard needs the same (prepare --spm-model with the first's model, or --shard-size)");
      }
      shard_prefixes.push_back(m.split_prefix("train", m.src_lang));
      shards.push_back(split_dataset(m, "train", shards.size()));
    }
    if (shards.size() > 1) log::info("training data in " + std::to_string(shards.size()) + " shards, one per epoch in turn");
    select_shard(0);
  }

  // A split's pairs: its two sides, or with batch.tokens_per_sample a language model's text cut
  // into fairseq's blocks (written once, in a private directory, as inputs and targets).
  std::unique_ptr<io::PrivateDirectory> blocks_dir;
  std::unique_ptr<data::PairDataset> split_dataset(const data::PreparedMeta& m, const std::string& split, size_t shard = 0) {
    if (cfg.tokens_per_sample <= 0) {
      return std::make_unique<data::PairDataset>(m.split_prefix(split, m.src_lang), m.split_prefix(split, m.tgt_lang));
    }
    if (!blocks_dir) blocks_dir = std::make_unique<io::PrivateDirectory>("leanseq-blocks");
    const std::string text = m.split_prefix(split, m.tgt_lang);
    const auto all = data::checked_sentences(data::IndexedDataset(text), tgt_dict.size(), text);
    const auto blocks = data::lm_blocks(all, cfg.tokens_per_sample,
                                        data::parse_break_mode(cfg.sample_break_mode, "batch.sample_break_mode"),
                                        data::Dictionary::kEos);
    const std::string out = blocks_dir->path() + "/" + split + std::to_string(shard);
    data::IndexedWriter inputs, targets;
    for (const auto& b : blocks) inputs.add(b.source), targets.add(b.target);
    inputs.save(out + ".in");
    targets.save(out + ".out");
    log::info(text + ": " + std::to_string(all.size()) + " sentences cut into " + std::to_string(blocks.size()) +
              " blocks of " + std::to_string(cfg.tokens_per_sample) + " tokens (" + cfg.sample_break_mode + ")");
    return std::make_unique<data::PairDataset>(out + ".in", out + ".out", true);
  }

  // Makes shard i the training data (its length limits checked); whether it changed.
  bool select_shard(size_t i) {
    if (i == current_shard) return false;
    current_shard = i;
    train = shards[i].get();
    train_lengths = train->lengths();
    check_lengths(shard_prefixes[i], train_lengths);
    return true;
  }

  // What turns text into the data's pieces, for the checkpoints and valid BLEU: the directory's
  // SentencePiece model(s), or (a fairseq-preprocess directory has none) what text.* names.
  void read_text_pipeline() {
    const bool given = !cfg.text_spm_model.empty() || !cfg.text_tokenizer.empty() || !cfg.text_bpe_codes.empty();
    if (meta.format != "fairseq") {
      if (given) {
        throw ConfigError("text.spm_model, text.tokenizer and text.bpe_codes are for data without a text pipeline "
                          "(fairseq-preprocess's); " + cfg.data + " has its SentencePiece model");
      }
      vocab.src_spm = io::read_file(meta.src_spm);
      vocab.tgt_spm = io::read_file(meta.tgt_spm);
      return;
    }
    if (!cfg.text_spm_model.empty() && (!cfg.text_tokenizer.empty() || !cfg.text_bpe_codes.empty())) {
      throw ConfigError("text.spm_model or text.tokenizer (with text.bpe_codes), not both");
    }
    if (!cfg.text_spm_model.empty()) {
      vocab.src_spm = vocab.tgt_spm = io::read_file(cfg.text_spm_model);
    } else if (!cfg.text_tokenizer.empty()) {
      vocab.tokenizer = text::parse_tokenizer_spec(cfg.text_tokenizer, "text.tokenizer").text();
      if (!cfg.text_bpe_codes.empty()) vocab.bpe_codes = io::read_file(cfg.text_bpe_codes);
    } else {
      throw ConfigError(meta.dir + " was written by fairseq-preprocess and holds no text pipeline: give its "
                                   "SentencePiece model (--set text.spm_model=PATH), or --set text.tokenizer=moses with "
                                   "--set text.bpe_codes=CODES for Moses and BPE, or --set text.tokenizer=none when "
                                   "the checkpoints are to read and write the data's subwords");
    }
    runtime::text_pipelines(vocab, cfg.data);  // a model or codes file that does not load is refused now
  }

  // Pairs over batch.max_source_len / max_target_len: an error naming the first, or (too_long:
  // skip) a count in the log; batch_by_size leaves them out.
  void check_lengths(const std::string& prefix, const std::vector<std::pair<int64_t, int64_t>>& lengths) const {
    const auto bo = cfg.batching();
    const int64_t first = data::first_too_long(lengths, bo);
    if (first < 0) return;
    if (cfg.too_long == "error") {
      throw DataError(prefix + ": pair " + std::to_string(first + 1) + " has " +
                      std::to_string(lengths[first].first) + " source and " + std::to_string(lengths[first].second) +
                      " target tokens (</s> included), over batch.max_source_len " + std::to_string(cfg.max_source_len) +
                      " / batch.max_target_len " + std::to_string(cfg.max_target_len) +
                      "; set batch.too_long: skip to leave such pairs out");
    }
    int64_t n = 0;
    for (const auto& l : lengths) n += bo.too_long(l);
    if (n == static_cast<int64_t>(lengths.size())) {
      throw DataError(prefix + ": every pair is over batch.max_source_len " +
                      std::to_string(cfg.max_source_len) + " / batch.max_target_len " +
                      std::to_string(cfg.max_target_len) + " (tokens, </s> included)");
    }
    log::warn(prefix + ": " + std::to_string(n) + " of " + std::to_string(lengths.size()) +
              " pairs are over the length limits and left out (batch.too_long: skip)");
  }

  // Parameters of another checkpoint with the same vocabularies (e.g. a baseline for a model that
  // shares attention): those the model has are copied, the rest stay as initialised.
  void init_from(const std::string& path) {
    auto init = checkpoint::read_checkpoint(path);
    if (init.vocab.src_dict != vocab.src_dict || init.vocab.tgt_dict != vocab.tgt_dict) {
      throw ConfigError("checkpoint.init_from: " + path + " was trained with other dictionaries than " + cfg.data);
    }
    auto r = models::load_named_tensors(*model, init.model_tensors, false, path);
    auto names = [](const std::vector<std::string>& v) {
      std::string s;
      for (size_t i = 0; i < v.size() && i < 4; ++i) s += (i ? ", " : " (") + v[i];
      return v.empty() ? s : s + (v.size() > 4 ? ", ...)" : ")");
    };
    log::info("initialised " + std::to_string(r.loaded) + " tensors from " + path + "; " +
              std::to_string(r.missing.size()) + " new" + names(r.missing) + ", " + std::to_string(r.unexpected.size()) +
              " of the checkpoint unused" + names(r.unexpected));
  }

  double valid_bleu() {
    if (!translator) {
      const auto [src_text, tgt_text] = runtime::text_pipelines(vocab, cfg.data);
      translator = std::make_unique<decode::Translator>(model, src_dict, tgt_dict, src_text, tgt_text);
    }
    size_t n = valid->size();
    if (cfg.eval_bleu_max_sentences > 0) n = std::min<size_t>(n, static_cast<size_t>(cfg.eval_bleu_max_sentences));
    std::vector<std::vector<int64_t>> sources;
    std::vector<std::string> refs;
    for (size_t i = 0; i < n; ++i) {
      auto b = valid->batch({static_cast<int64_t>(i)});
      auto s = b.src[0];
      sources.emplace_back(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + s.numel());
      auto t = b.target[0];
      refs.push_back(translator->detokenize(std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel())));
    }
    decode::TranslateOptions to;
    to.search.beam = cfg.eval_bleu_beam;
    to.search.lenpen = cfg.eval_bleu_lenpen;
    to.search.max_len_a = 1.2;
    to.search.max_len_b = 10;
    auto out = translator->translate_ids(sources, to);
    std::vector<std::string> hyps;
    for (auto& o : out) hyps.push_back(o.empty() ? "" : o[0].text);
    return eval::corpus_bleu(hyps, {refs}).score;
  }
};

TranslationTask::TranslationTask(checkpoint::RunConfig cfg) : impl_(std::make_unique<Impl>()) { impl_->cfg = std::move(cfg); }
TranslationTask::~TranslationTask() = default;

void TranslationTask::setup(const checkpoint::Checkpoint* resumed, const std::string& resumed_path) {
  auto& s = *impl_;
  s.read_data();
  if (resumed) {
    auto saved = checkpoint::resolve_run_config(parse_yaml_text(resumed->config_yaml, resumed_path + " (config)"));
    if (saved.arch != s.cfg.arch || dump_config_yaml(*saved.model) != dump_config_yaml(*s.cfg.model)) {
      log::warn("resuming with the model config stored in " + resumed_path + " (arch " + saved.arch + ")");
    }
    s.cfg.arch = saved.arch;
    s.cfg.model = saved.model;
  }
  s.model = models::build_model(*s.cfg.model, {s.src_dict.size(), s.tgt_dict.size(), s.meta.joint});
  if (!resumed && !s.cfg.init_from.empty()) s.init_from(s.cfg.init_from);
}

torch::nn::Module& TranslationTask::model() { return *impl_->model; }

std::string TranslationTask::describe() const {
  const auto& s = *impl_;
  const auto batches = train_batches();
  const auto pad = data::padding_of(batches, s.train_lengths);
  char padding[96];
  std::snprintf(padding, sizeof padding, "; %zu batches, padding %.1f%% of source and %.1f%% of target positions",
                batches.size(), 100 * pad.src_fraction(), 100 * pad.tgt_fraction());
  return "model " + s.cfg.arch + " (" + s.cfg.model->summary() + "), " + std::to_string(models::count_parameters(*s.model)) +
         " parameters; " + std::to_string(s.train->size()) + " training pairs" +
         (s.shards.size() > 1 ? " in the first of " + std::to_string(s.shards.size()) + " shards" : "") + ", " + std::to_string(s.valid->size()) + " valid" +
         padding;
}

std::unique_ptr<torch::optim::Optimizer> TranslationTask::make_optimizer(const std::vector<torch::Tensor>& params) {
  const auto& c = impl_->cfg;
  if (c.optimizer == "nag") return std::make_unique<NAG>(params, c.lr.lr, c.momentum, c.adam.weight_decay);
  return std::make_unique<Adam>(params, c.adam.options(c.lr.lr));
}

double TranslationTask::learning_rate(const checkpoint::TrainerProgress& p) const {
  return train::learning_rate(impl_->cfg.lr, {p.num_updates, p.epoch, p.lr_shrinks});
}

bool TranslationTask::begin_epoch(int64_t epoch) {
  const auto n = static_cast<int64_t>(impl_->shards.size());
  return impl_->select_shard(static_cast<size_t>(((epoch - 1) % n + n) % n));
}

std::vector<std::vector<int64_t>> TranslationTask::train_batches() const {
  return data::batch_by_size(impl_->train_lengths, impl_->cfg.batching());
}

BatchLoss TranslationTask::loss(const std::vector<int64_t>& batch, const torch::Device& device, const MixedPrecision& amp) {
  auto& s = *impl_;
  auto b = s.train->batch(batch).to(device);
  models::DecoderOut out;
  {
    MixedPrecision::Autocast autocast(amp);
    out = s.model->forward(b.src, b.src_lengths, b.prev_output);
  }
  auto logits = kernels::cross_entropy_input(out.logits);
  auto r = kernels::label_smoothed_cross_entropy(logits.view({-1, logits.size(-1)}), b.target.view(-1),
                                                 s.cfg.label_smoothing, kPad);
  return {r.loss, static_cast<double>(b.ntokens), {r.loss.item<double>(), r.nll.item<double>()}};
}

std::vector<Stat> TranslationTask::train_stats(const std::vector<double>& sums, double weight) const {
  const double loss = sums[0] / weight / kLn2, nll = sums[1] / weight / kLn2;
  return {{"loss", "loss", loss, 3}, {"nll_loss", "nll", nll, 3}, {"ppl", "ppl", std::pow(2.0, nll), 2}};
}

Validation TranslationTask::validate(const torch::Device& device, Distributed* dist) {
  (void)device;
  auto& s = *impl_;
  const int rank = dist ? dist->rank() : 0, ranks = dist ? dist->world_size() : 1;
  auto totals = dataset_loss(*s.model, *s.valid, s.cfg.batching(), s.cfg.label_smoothing, rank, ranks);
  if (dist) {
    std::vector<double> sums{totals.loss, totals.nll, static_cast<double>(totals.tokens)};
    dist->all_reduce_sum(sums, "the all-reduce of validation sums");
    totals.loss = sums[0], totals.nll = sums[1], totals.tokens = static_cast<int64_t>(sums[2]);
  }
  Validation v;
  v.loss = totals.loss_base2();
  const double nll = totals.nll_base2();
  v.stats = {{"loss", "loss", v.loss, 3}, {"nll_loss", "nll", nll, 3}, {"ppl", "ppl", std::pow(2.0, nll), 2}};
  if (s.cfg.eval_bleu) {
    // Rank 0 decodes; the others wait for its score.
    auto bleu = torch::zeros({1}, torch::kDouble);
    if (rank == 0) {
      torch::NoGradGuard no_grad;
      bleu.fill_(s.valid_bleu());
    }
    if (dist) {
      std::vector<torch::Tensor> t{bleu};
      dist->broadcast(t, 0, "the broadcast of validation BLEU");
    }
    v.bleu = bleu.item<double>();
    v.stats.push_back({"bleu", "bleu", v.bleu, 2});
  }
  v.metric = s.cfg.best_metric == "bleu" ? v.bleu : v.loss;
  return v;
}

std::string TranslationTask::metric_name() const { return impl_->cfg.best_metric; }
bool TranslationTask::higher_is_better() const { return impl_->cfg.best_metric == "bleu"; }

// At the end of an epoch, a valid loss that does not improve shrinks a fixed schedule with
// shrink_on_plateau.
void TranslationTask::after_validation(const Validation& v, bool better, bool epoch_end, checkpoint::TrainerProgress& progress) {
  (void)better;
  if (!epoch_end) return;
  const auto& lr = impl_->cfg.lr;
  if (!std::isnan(progress.best_valid_loss) && v.loss >= progress.best_valid_loss && lr.kind == "fixed" &&
      lr.shrink_on_plateau) {
    ++progress.lr_shrinks;
    char buf[96];
    std::snprintf(buf, sizeof buf, "valid loss did not improve: learning rate now %.3e", learning_rate(progress));
    log::info(buf);
  }
  if (std::isnan(progress.best_valid_loss) || v.loss < progress.best_valid_loss) progress.best_valid_loss = v.loss;
}

std::string TranslationTask::config_yaml() { return checkpoint::dump_run_config(impl_->cfg); }
checkpoint::VocabFiles TranslationTask::vocab() const { return impl_->vocab; }

}  // namespace leanseq::train
