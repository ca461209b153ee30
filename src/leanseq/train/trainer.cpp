#include "leanseq/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/blas.h"
#include "leanseq/core/threads.h"
#include "leanseq/core/timer.h"
#include "leanseq/data/batching.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/prepare.h"
#include "leanseq/data/spm.h"
#include "leanseq/decode/translator.h"
#include "leanseq/eval/bleu.h"
#include "leanseq/kernels/label_smoothed_ce.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/train/checkpoint.h"
#include "leanseq/train/distributed.h"
#include "leanseq/train/evaluate.h"
#include "leanseq/train/nag.h"
#include "leanseq/train/signals.h"

namespace fs = std::filesystem;

namespace leanseq::train {

namespace {
constexpr int64_t kPad = data::Dictionary::kPad;
constexpr double kLn2 = 0.69314718055994530942;

// v with `prec` digits after the point, fixed or (scientific) in exponent notation.
std::string fmt(double v, int prec, bool scientific = false) {
  char buf[64];
  std::snprintf(buf, sizeof buf, scientific ? "%.*e" : "%.*f", prec, v);
  return buf;
}
}  // namespace

struct Trainer::Impl {
  RunConfig cfg;
  data::PreparedMeta meta;
  data::Dictionary src_dict, tgt_dict;
  VocabFiles vocab;
  std::unique_ptr<data::PairDataset> train, valid;
  std::vector<std::pair<int64_t, int64_t>> train_lengths;
  std::shared_ptr<models::Seq2SeqModel> model;
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  TrainerProgress progress;
  Timer timer;  // this run segment
  std::ofstream log_file;
  bool tty = false;
  int64_t tokens_this_run = 0;
  double train_seconds_this_run = 0;
  // running sums since the last log line
  double log_loss = 0, log_nll = 0, log_tokens = 0, log_seconds = 0;
  int64_t log_updates = 0;
  std::unique_ptr<decode::Translator> translator;  // for validation BLEU
  std::unique_ptr<Distributed> dist;                // null: a single process
  torch::Device device{torch::kCPU};                // where the model trains
  std::unique_ptr<nn::TargetedDropout> td;          // td.type != none
  double log_comm_seconds = 0;                      // in collectives since the last log line
  double comm_seconds_this_run = 0;

  double elapsed() const { return progress.elapsed_seconds + timer.seconds(); }
  bool max_update_reached() const { return cfg.max_update > 0 && progress.num_updates >= cfg.max_update; }
  bool out_of_patience() const { return cfg.patience > 0 && progress.validations_since_best >= cfg.patience; }
  bool max_minutes_reached() const { return cfg.max_minutes > 0 && elapsed() >= cfg.max_minutes * 60.0; }
  // Only rank 0 writes checkpoints and logs.
  bool main_process() const { return !dist || dist->rank() == 0; }
  int rank() const { return dist ? dist->rank() : 0; }
  int world_size() const { return dist ? dist->world_size() : 1; }

  // The training device: `device` of the config, where a plain "cuda" means the GPU of this
  // rank's LOCAL_RANK.
  void choose_device(const std::optional<DistributedEnv>& env) {
    device = resolve_device(cfg.device, "device", env ? env->local_rank : 0);
  }

  // Joins the process group when the environment names one (WORLD_SIZE set, even to 1). Ranks
  // above 0 log only warnings and errors, prefixed with their rank.
  void join_process_group(const std::optional<DistributedEnv>& env) {
    if (!env) return;
    if (env->rank > 0) {
      log::set_level(log::Level::warn);
      log::set_prefix("rank " + std::to_string(env->rank) + ": ");
    }
    dist = std::make_unique<Distributed>(
        *env, std::chrono::milliseconds(static_cast<int64_t>(cfg.dist_timeout * 1000.0)), device);
    log::info("distributed: " + std::to_string(env->world_size) + " ranks (" + dist->backend() + "), rendezvous " + env->master_addr + ":" +
              std::to_string(env->master_port) + "; each update takes " + std::to_string(cfg.update_freq) +
              " batch(es) per rank");
  }

  // Every rank starts from rank 0's parameters and buffers; the random streams (dropout) differ
  // per rank.
  void synchronise_start() {
    if (!dist) return;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> state;
    for (auto& p : model->parameters()) state.push_back(p.detach());
    dist->broadcast(state, 0, "the broadcast of rank 0's parameters");
    synchronise_buffers();
    if (rank() > 0) {
      torch::manual_seed(static_cast<uint64_t>(cfg.seed) * 1000003ULL + static_cast<uint64_t>(rank()) * 7919ULL +
                         static_cast<uint64_t>(progress.num_updates));
    }
  }

  // Buffers that training updates on each rank from its own batches (BatchNorm's running
  // statistics) take rank 0's values, which are the ones it saves.
  void synchronise_buffers() {
    if (!dist) return;
    std::vector<torch::Tensor> buffers;
    for (auto& b : model->buffers()) buffers.push_back(b);
    if (!buffers.empty()) dist->broadcast(buffers, 0, "the broadcast of rank 0's buffers");
  }

  // Adds loss, nll and token sums over the ranks (in place; nothing for one process).
  void sum_over_ranks(double& loss, double& nll, int64_t& tokens, const std::string& what) {
    if (!dist) return;
    auto sums = torch::tensor({loss, nll, static_cast<double>(tokens)}, torch::kDouble);
    dist->all_reduce_sum(sums, what);
    loss = sums[0].item<double>(), nll = sums[1].item<double>();
    tokens = static_cast<int64_t>(sums[2].item<double>());
  }

  // The signal any rank received (0: none) and whether the time budget is spent by rank 0's
  // clock: the same answer on every rank, so that all stop after the same update.
  struct StopState {
    int signal = 0;
    bool time_up = false;
  };
  StopState stop_state() {
    StopState st{stop_signal(), max_minutes_reached()};
    if (!dist) return st;
    auto t = torch::tensor({static_cast<double>(st.signal), main_process() && st.time_up ? 1.0 : 0.0}, torch::kDouble);
    dist->all_reduce_max(t, "the stop check");
    return {static_cast<int>(t[0].item<double>()), t[1].item<double>() > 0};
  }

  void setup(bool resume) {
    leanseq::set_compute_threads(static_cast<int>(cfg.threads));
    if (cfg.data.empty()) throw ConfigError("train: no data directory (--data DIR, written by leanseq prepare)");
    meta = data::load_prepared(cfg.data);
    src_dict = data::Dictionary::load(meta.src_dict);
    tgt_dict = data::Dictionary::load(meta.tgt_dict);
    vocab.src_lang = meta.src_lang;
    vocab.tgt_lang = meta.tgt_lang;
    vocab.src_dict = read_bytes(meta.src_dict);
    vocab.tgt_dict = read_bytes(meta.tgt_dict);
    vocab.src_spm = read_bytes(meta.src_spm);
    vocab.tgt_spm = read_bytes(meta.tgt_spm);
    vocab.joint = meta.joint;
    if (meta.language_model() != cfg.model->language_model()) {
      throw ConfigError(cfg.model->language_model()
                            ? "arch " + cfg.arch + " is a language model; prepare its data with 'leanseq prepare --lm'"
                            : "data " + cfg.data + " is a language-model corpus; arch " + cfg.arch +
                                  " needs parallel data (or use a language-model arch such as lightconv_lm_small)");
    }
    if (meta.language_model() && cfg.eval_bleu) throw ConfigError("valid.bleu: a language model has no BLEU");
    // A language-model corpus has one side, read as both source and target (its model ignores
    // the source).
    train = std::make_unique<data::PairDataset>(meta.split_prefix("train", meta.src_lang),
                                                meta.split_prefix("train", meta.tgt_lang));
    valid = std::make_unique<data::PairDataset>(meta.split_prefix("valid", meta.src_lang),
                                                meta.split_prefix("valid", meta.tgt_lang));
    train_lengths = train->lengths();
    check_lengths("train", train_lengths);
    check_lengths("valid", valid->lengths());
    const auto env = DistributedEnv::from_environment();
    choose_device(env);
    join_process_group(env);

    io::make_dirs(cfg.save_dir);
    std::string last = cfg.save_dir + "/checkpoint_last.pt";
    std::optional<Checkpoint> ck;
    if (resume && io::file_exists(last)) {
      ck = read_checkpoint(last, device);
      auto saved = resolve_run_config(parse_yaml_text(ck->config_yaml, last + " (config)"));
      if (saved.arch != cfg.arch || dump_config_yaml(*saved.model) != dump_config_yaml(*cfg.model)) {
        log::warn("resuming with the model config stored in " + last + " (arch " + saved.arch + ")");
      }
      cfg.arch = saved.arch;
      cfg.model = saved.model;
    }
    torch::manual_seed(static_cast<uint64_t>(cfg.seed));
    model = models::build_model(*cfg.model, {src_dict.size(), tgt_dict.size(), meta.joint});
    model->to(device);
    params = models::unique_parameters(*model);
    if (cfg.optimizer == "nag") {
      optimizer = std::make_unique<NAG>(params, cfg.lr.lr, cfg.momentum, cfg.weight_decay);
    } else {
      torch::optim::AdamOptions ao(cfg.lr.lr);
      ao.betas({cfg.adam_beta1, cfg.adam_beta2}).eps(cfg.adam_eps).weight_decay(cfg.weight_decay);
      optimizer = std::make_unique<torch::optim::Adam>(params, ao);
    }
    if (ck) {
      models::load_named_tensors(*model, ck->model_tensors, true, last);
      if (ck->optimizer) optimizer->load(*ck->optimizer);
      progress = ck->progress;
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(ck->rng_state);
      log::info("resumed from " + last + " at epoch " + std::to_string(progress.epoch) + ", update " +
                std::to_string(progress.num_updates));
    } else if (!cfg.init_from.empty()) {
      init_from(cfg.init_from);
    }
    synchronise_start();
    if (cfg.td.enabled()) {
      td = std::make_unique<nn::TargetedDropout>(cfg.td, *model);
      log::info("targeted dropout: " + cfg.td.summary());
    }
    if (main_process()) log_file.open(cfg.save_dir + "/train_log.jsonl", std::ios::app);
    tty = main_process() && cfg.log_format == "auto" && isatty(2);
    log::info("model " + cfg.arch + " (" + cfg.model->summary() + "), " + std::to_string(models::count_parameters(*model)) +
              " parameters, on " + device.str() + "; " + std::to_string(train->size()) + " training pairs, " + std::to_string(valid->size()) +
              " valid");
    log::info(blas_summary());
  }

  // Pairs over batch.max_source_len / max_target_len: an error naming the first, or (too_long:
  // skip) a count in the log; batch_by_size leaves them out.
  void check_lengths(const std::string& split, const std::vector<std::pair<int64_t, int64_t>>& lengths) const {
    const auto bo = cfg.batching();
    const int64_t first = data::first_too_long(lengths, bo);
    if (first < 0) return;
    if (cfg.too_long == "error") {
      throw DataError(meta.split_prefix(split, meta.src_lang) + ": pair " + std::to_string(first + 1) + " has " +
                      std::to_string(lengths[first].first) + " source and " + std::to_string(lengths[first].second) +
                      " target tokens (</s> included), over batch.max_source_len " + std::to_string(cfg.max_source_len) +
                      " / batch.max_target_len " + std::to_string(cfg.max_target_len) +
                      "; set batch.too_long: skip to leave such pairs out");
    }
    int64_t n = 0;
    for (const auto& l : lengths) n += bo.too_long(l);
    if (n == static_cast<int64_t>(lengths.size())) {
      throw DataError(meta.split_prefix(split, meta.src_lang) + ": every pair is over batch.max_source_len " +
                      std::to_string(cfg.max_source_len) + " / batch.max_target_len " +
                      std::to_string(cfg.max_target_len) + " (tokens, </s> included)");
    }
    log::warn(split + ": " + std::to_string(n) + " of " + std::to_string(lengths.size()) +
              " pairs are over the length limits and left out (batch.too_long: skip)");
  }

  // Parameters of another checkpoint with the same vocabularies (e.g. a baseline for a model that
  // shares attention): those the model has are copied, the rest stay as initialised.
  void init_from(const std::string& path) {
    auto init = read_checkpoint(path);
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

  double current_lr() const {
    return learning_rate(cfg.lr, {progress.num_updates, progress.epoch, progress.lr_shrinks});
  }

  void set_lr(double lr) {
    for (auto& group : optimizer->param_groups()) group.options().set_lr(lr);
  }

  // One update over `batches` (this rank's share of the update; possibly none at the end of an
  // epoch). Gradients and loss sums are added over ranks. Returns false when no rank had a token.
  bool train_step(const std::vector<std::vector<int64_t>>& batches) {
    Timer t;
    model->train();
    optimizer->zero_grad();
    double loss_sum = 0, nll_sum = 0;
    int64_t ntokens = 0;
    if (td) td->begin_update(progress.num_updates);
    for (const auto& ids : batches) {
      auto b = train->batch(ids).to(device);
      auto out = model->forward(b.src, b.src_lengths, b.prev_output);
      auto logits = out.logits.to(torch::kFloat);
      auto r = kernels::label_smoothed_cross_entropy(logits.view({-1, logits.size(-1)}), b.target.view(-1),
                                                     cfg.label_smoothing, kPad);
      r.loss.backward();
      loss_sum += r.loss.item<double>();
      nll_sum += r.nll.item<double>();
      ntokens += b.ntokens;
    }
    if (td) td->end_update();  // before the all-reduce: each rank's gradient through its own masks
    if (dist) {
      Timer comm;
      sum_over_ranks(loss_sum, nll_sum, ntokens, "the all-reduce of loss sums");
      dist->all_reduce_gradients(params, static_cast<int64_t>(cfg.dist_bucket_mb * 1024 * 1024));
      if (device.is_cuda()) torch::cuda::synchronize(device.index());
      const double c = comm.seconds();
      log_comm_seconds += c, comm_seconds_this_run += c;
    }
    if (ntokens == 0) return false;
    // Gradients of the summed loss (over all ranks), normalised by the number of target tokens
    // (fairseq's sample_size).
    for (auto& p : params) {
      if (p.grad().defined()) p.grad().div_(static_cast<double>(ntokens));
    }
    if (cfg.clip_norm > 0) torch::nn::utils::clip_grad_norm_(params, cfg.clip_norm);
    double lr = current_lr();
    set_lr(lr);
    optimizer->step();
    ++progress.num_updates;
    if (dist && cfg.dist_check_weights > 0 && progress.num_updates % cfg.dist_check_weights == 0) {
      const double d = dist->max_difference_from_rank0(params);
      if (d > 0) {
        throw DistributedError("distributed: after update " + std::to_string(progress.num_updates) +
                               " the ranks' weights differ from rank 0's by up to " + fmt(d, 9, true) +
                               " (dist.check_weights); the ranks no longer train one model");
      }
    }
    double secs = t.seconds();
    tokens_this_run += ntokens;
    train_seconds_this_run += secs;
    log_loss += loss_sum, log_nll += nll_sum, log_tokens += static_cast<double>(ntokens), log_seconds += secs;
    ++log_updates;
    return true;
  }

  void write_record(nlohmann::json rec) {
    if (!main_process()) return;
    rec["minutes"] = elapsed() / 60.0;
    rec["epoch"] = progress.epoch;
    rec["update"] = progress.num_updates;
    log_file << rec.dump() << "\n";
    log_file.flush();
    if (cfg.log_format == "json") std::cout << rec.dump() << std::endl;
  }

  void maybe_log(int64_t batch_index, int64_t n_batches) {
    if (!main_process()) return;
    if (tty) {
      double frac = static_cast<double>(batch_index) / static_cast<double>(std::max<int64_t>(n_batches, 1));
      int width = 20, filled = static_cast<int>(frac * width);
      std::string bar(static_cast<size_t>(filled), '=');
      bar += std::string(static_cast<size_t>(width - filled), ' ');
      double loss = log_tokens > 0 ? log_loss / log_tokens / kLn2 : 0;
      std::fprintf(stderr, "\repoch %ld [%s] %3d%% | update %ld | loss %.3f | lr %.2e | %.0f tok/s | %.1f min   ",
                   static_cast<long>(progress.epoch), bar.c_str(), static_cast<int>(frac * 100),
                   static_cast<long>(progress.num_updates), loss, current_lr(),
                   log_seconds > 0 ? log_tokens / log_seconds : 0.0, elapsed() / 60.0);
      std::fflush(stderr);
    }
    if (progress.num_updates % cfg.log_interval != 0) return;
    nlohmann::json rec{{"type", "train"},
                       {"loss", log_loss / log_tokens / kLn2},
                       {"nll_loss", log_nll / log_tokens / kLn2},
                       {"ppl", std::pow(2.0, log_nll / log_tokens / kLn2)},
                       {"lr", current_lr()},
                       {"tokens_per_second", log_tokens / log_seconds}};
    if (dist) rec["allreduce_ms_per_update"] = 1000.0 * log_comm_seconds / static_cast<double>(log_updates);
    write_record(rec);
    if (!tty && cfg.log_format != "json") {
      log::info("epoch " + std::to_string(progress.epoch) + " | update " + std::to_string(progress.num_updates) +
                " | loss " + fmt(rec["loss"], 3) + " | nll " + fmt(rec["nll_loss"], 3) + " | ppl " +
                fmt(rec["ppl"], 2) + " | lr " + fmt(rec["lr"].get<double>(), 3, true) + " | " +
                fmt(rec["tokens_per_second"], 0) + " tok/s | " + fmt(elapsed() / 60.0, 1) + " min");
    }
    log_loss = log_nll = log_tokens = log_seconds = log_comm_seconds = 0;
    log_updates = 0;
  }

  ValidResult validate() {
    ValidResult r;
    nn::ScopedEvalPrune pruned(td.get());
    synchronise_buffers();
    auto totals = dataset_loss(*model, *valid, cfg.batching(), cfg.label_smoothing, rank(), world_size());
    sum_over_ranks(totals.loss, totals.nll, totals.tokens, "the all-reduce of validation sums");
    r.loss = totals.loss_base2();
    r.nll_loss = totals.nll_base2();
    if (cfg.eval_bleu) {
      // Rank 0 decodes; the others wait for its score.
      auto bleu = torch::zeros({1}, torch::kDouble);
      if (main_process()) {
        model->eval();
        torch::NoGradGuard no_grad;
        bleu.fill_(valid_bleu());
      }
      if (dist) {
        std::vector<torch::Tensor> v{bleu};
        dist->broadcast(v, 0, "the broadcast of validation BLEU");
      }
      r.bleu = bleu.item<double>();
    }
    return r;
  }

  double valid_bleu() {
    if (!translator) {
      auto src_spm = std::make_shared<data::SentencePiece>(meta.src_spm);
      auto tgt_spm = meta.tgt_spm == meta.src_spm ? src_spm : std::make_shared<data::SentencePiece>(meta.tgt_spm);
      translator = std::make_unique<decode::Translator>(model, src_dict, tgt_dict, src_spm, tgt_spm);
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

  void save(const std::string& name) {
    if (!main_process()) return;
    std::string yaml = dump_run_config(cfg);
    TrainerProgress p = progress;
    p.elapsed_seconds = elapsed();
    save_checkpoint(cfg.save_dir + "/" + name, yaml, vocab, p, *model, optimizer.get());
  }

  void copy_checkpoint(const std::string& from, const std::string& to) {
    if (!main_process()) return;
    io::atomic_write(cfg.save_dir + "/" + to, [&](const std::string& tmp) {
      fs::copy_file(cfg.save_dir + "/" + from, tmp, fs::copy_options::overwrite_existing);
    });
  }

  // Validates, logs, and saves checkpoint_last (+ best, + `extra` when given). At the end of an
  // epoch, a valid loss that does not improve shrinks a fixed schedule with shrink_on_plateau.
  void validate_and_save(const std::string& extra, bool epoch_end = false) {
    if (tty) std::fprintf(stderr, "\n");
    auto v = validate();
    nlohmann::json rec{{"type", "valid"}, {"loss", v.loss}, {"nll_loss", v.nll_loss}, {"ppl", std::pow(2.0, v.nll_loss)}};
    if (v.bleu >= 0) rec["bleu"] = v.bleu;
    write_record(rec);
    log::info("valid | epoch " + std::to_string(progress.epoch) + " | update " + std::to_string(progress.num_updates) +
              " | loss " + fmt(v.loss, 3) + " | nll " + fmt(v.nll_loss, 3) + " | ppl " + fmt(std::pow(2.0, v.nll_loss), 2) +
              (v.bleu >= 0 ? " | bleu " + fmt(v.bleu, 2) : ""));
    last_valid = v;
    last_validated_update = progress.num_updates;
    if (epoch_end) {
      if (!std::isnan(progress.best_valid_loss) && v.loss >= progress.best_valid_loss && cfg.lr.kind == "fixed" &&
          cfg.lr.shrink_on_plateau) {
        ++progress.lr_shrinks;
        log::info("valid loss did not improve: learning rate now " + fmt(current_lr(), 3, true));
      }
      if (std::isnan(progress.best_valid_loss) || v.loss < progress.best_valid_loss) progress.best_valid_loss = v.loss;
    }
    double metric = cfg.best_metric == "bleu" ? v.bleu : v.loss;
    bool better = std::isnan(progress.best_metric) ||
                  (cfg.best_metric == "bleu" ? metric > progress.best_metric : metric < progress.best_metric);
    if (better) progress.best_metric = metric;
    progress.validations_since_best = better ? 0 : progress.validations_since_best + 1;
    if (out_of_patience() && main_process()) {
      log::info("stopping: " + std::to_string(cfg.patience) + " validations without a better " + cfg.best_metric);
    }
    save("checkpoint_last.pt");
    if (better) copy_checkpoint("checkpoint_last.pt", "checkpoint_best.pt");
    if (!extra.empty()) copy_checkpoint("checkpoint_last.pt", extra);
  }

  void prune_interval_checkpoints() {
    if (cfg.keep_interval_updates < 0 || !main_process()) return;
    std::vector<std::pair<int64_t, fs::path>> found;
    for (const auto& e : fs::directory_iterator(cfg.save_dir)) {
      std::string n = e.path().filename().string();
      auto us = n.rfind('_');
      if (n.rfind("checkpoint_", 0) == 0 && us != std::string::npos && n.find('_') != us && n.size() > 3 &&
          n.substr(n.size() - 3) == ".pt") {
        try {
          found.emplace_back(std::stoll(n.substr(us + 1)), e.path());
        } catch (...) {
        }
      }
    }
    std::sort(found.begin(), found.end());
    while (static_cast<int64_t>(found.size()) > cfg.keep_interval_updates) {
      fs::remove(found.front().second);
      found.erase(found.begin());
    }
  }

  ValidResult last_valid;
  int64_t last_validated_update = -1;
};

Trainer::Trainer(RunConfig cfg, bool resume) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = std::move(cfg);
  impl_->setup(resume);
}

Trainer::~Trainer() = default;

ValidResult Trainer::validate() { return impl_->validate(); }

TrainOutcome Trainer::run() {
  auto& s = *impl_;
  auto& cfg = s.cfg;
  TrainOutcome out;
  install_stop_handlers();
  auto sorted_batches = data::batch_by_size(s.train_lengths, cfg.batching());
  // Limits already reached when a resumed run starts (rank 0's checkpoint: the same on every rank).
  bool stop = s.max_update_reached() || s.max_minutes_reached() || (cfg.max_epoch > 0 && s.progress.epoch > cfg.max_epoch);
  while (!stop) {
    auto batches = sorted_batches;
    data::shuffle_batches(batches, static_cast<uint64_t>(cfg.seed) * 1000003ULL + static_cast<uint64_t>(s.progress.epoch));
    const int64_t n = static_cast<int64_t>(batches.size());
    // An update consumes update_freq batches per rank: rank r takes every world_size-th of them
    // from the r-th on, so W ranks with update_freq U see the batches of one process with W * U.
    const int64_t per_update = cfg.update_freq * s.world_size();
    while (s.progress.batch_in_epoch < n) {
      std::vector<std::vector<int64_t>> group;
      for (int64_t k = s.rank(); k < per_update && s.progress.batch_in_epoch + k < n; k += s.world_size()) {
        group.push_back(batches[s.progress.batch_in_epoch + k]);
      }
      s.progress.batch_in_epoch = std::min(n, s.progress.batch_in_epoch + per_update);
      s.train_step(group);
      s.maybe_log(s.progress.batch_in_epoch, n);
      if (cfg.save_interval_updates > 0 && s.progress.num_updates % cfg.save_interval_updates == 0) {
        s.validate_and_save("checkpoint_" + std::to_string(s.progress.epoch) + "_" +
                            std::to_string(s.progress.num_updates) + ".pt");
        s.prune_interval_checkpoints();
      } else if (cfg.validate_interval_updates > 0 && s.progress.num_updates % cfg.validate_interval_updates == 0) {
        s.validate_and_save("");
      }
      const auto st = s.stop_state();
      if (int sig = st.signal) {
        if (s.tty) std::fprintf(stderr, "\n");
        if (s.main_process()) log::warn("signal " + std::to_string(sig) + " received: saving checkpoint_last.pt and stopping");
        s.save("checkpoint_last.pt");
        out.signal = sig;
        stop = true;
        break;
      }
      if (s.max_update_reached() || st.time_up || s.out_of_patience()) {
        stop = true;
        break;
      }
    }
    if (out.signal) break;
    if (s.progress.batch_in_epoch >= n) {
      // End of epoch: the next one starts from its first batch.
      int64_t finished = s.progress.epoch;
      ++s.progress.epoch;
      s.progress.batch_in_epoch = 0;
      ++out.epochs_done;
      s.validate_and_save(cfg.no_epoch_checkpoints ? "" : "checkpoint" + std::to_string(finished) + ".pt", true);
      if ((cfg.max_epoch > 0 && s.progress.epoch > cfg.max_epoch) || s.out_of_patience()) stop = true;
    } else if (stop && s.last_validated_update != s.progress.num_updates) {
      s.validate_and_save("");
    }
  }
  if (s.tty) std::fprintf(stderr, "\n");
  out.num_updates = s.progress.num_updates;
  out.best_metric = s.progress.best_metric;
  out.last_valid_loss = s.last_valid.loss;
  out.last_valid_bleu = s.last_valid.bleu;
  out.train_target_tokens = s.tokens_this_run;
  out.train_seconds = s.train_seconds_this_run;
  out.comm_seconds = s.comm_seconds_this_run;
  out.train_tokens_per_second = s.train_seconds_this_run > 0 ? s.tokens_this_run / s.train_seconds_this_run : 0;
  return out;
}

}  // namespace leanseq::train
