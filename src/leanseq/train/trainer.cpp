#include "leanseq/train/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "leanseq/core/blas.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/memory.h"
#include "leanseq/core/threads.h"
#include "leanseq/core/timer.h"
#include "leanseq/data/batching.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/train/distributed.h"
#include "leanseq/train/mixed_precision.h"
#include "leanseq/train/optimizer_state.h"
#include "leanseq/train/signals.h"
#include "leanseq/train/translation_task.h"

namespace fs = std::filesystem;

namespace leanseq::train {

namespace {
// v with `prec` digits after the point, fixed or (scientific) in exponent notation.
std::string fmt(double v, int prec, bool scientific = false) {
  char buf[64];
  std::snprintf(buf, sizeof buf, scientific ? "%.*e" : "%.*f", prec, v);
  return buf;
}

std::string stat_text(const std::vector<Stat>& stats) {
  std::string s;
  for (const auto& st : stats) s += " | " + st.label + " " + fmt(st.value, st.precision);
  return s;
}
}  // namespace

struct Trainer::Impl {
  std::unique_ptr<Task> task;
  checkpoint::TrainLoopOptions opt;
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<MixedPrecision> amp;  // autocast and loss scaling (optim.amp); off by default
  checkpoint::TrainerProgress progress;
  Timer timer;  // this run segment
  std::ofstream log_file;
  bool tty = false;
  double weight_this_run = 0, train_seconds_this_run = 0;
  // running sums since the last log line
  std::vector<double> log_sums;
  double log_weight = 0, log_seconds = 0;
  int64_t log_updates = 0;
  std::unique_ptr<Distributed> dist;        // null: a single process
  torch::Device device{torch::kCPU};        // where the model trains
  std::unique_ptr<nn::TargetedDropout> td;  // td.type != none
  double log_comm_seconds = 0;              // in collectives since the last log line
  double comm_seconds_this_run = 0;
  Validation last_valid;
  int64_t last_validated_update = -1;

  double elapsed() const { return progress.elapsed_seconds + timer.seconds(); }
  bool max_update_reached() const { return opt.max_update > 0 && progress.num_updates >= opt.max_update; }
  bool out_of_patience() const { return opt.patience > 0 && progress.validations_since_best >= opt.patience; }
  bool max_minutes_reached() const { return opt.max_minutes > 0 && elapsed() >= opt.max_minutes * 60.0; }
  bool max_epoch_passed() const { return opt.max_epoch > 0 && progress.epoch > opt.max_epoch; }
  // Only rank 0 writes checkpoints and logs.
  bool main_process() const { return !dist || dist->rank() == 0; }
  int rank() const { return dist ? dist->rank() : 0; }
  int world_size() const { return dist ? dist->world_size() : 1; }

  // Joins the process group when the environment names one (WORLD_SIZE set, even to 1). Ranks
  // above 0 log only warnings and errors, prefixed with their rank.
  void join_process_group(const std::optional<DistributedEnv>& env) {
    if (!env) return;
    if (env->rank > 0) {
      log::set_level(log::Level::warn);
      log::set_prefix("rank " + std::to_string(env->rank) + ": ");
    }
    dist = std::make_unique<Distributed>(
        *env, std::chrono::milliseconds(static_cast<int64_t>(opt.dist_timeout * 1000.0)), device);
    log::info("distributed: " + std::to_string(env->world_size) + " ranks (" + dist->backend() + "), rendezvous " +
              env->master_addr + ":" + std::to_string(env->master_port) + "; each update takes " +
              std::to_string(opt.update_freq) + " batch(es) per rank");
  }

  // Every rank starts from rank 0's parameters and buffers; the random streams (dropout) differ
  // per rank.
  void synchronise_start() {
    if (!dist) return;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> state;
    for (auto& p : task->model().parameters()) state.push_back(p.detach());
    dist->broadcast(state, 0, "the broadcast of rank 0's parameters");
    synchronise_buffers();
    if (rank() > 0) {
      torch::manual_seed(static_cast<uint64_t>(opt.seed) * 1000003ULL + static_cast<uint64_t>(rank()) * 7919ULL +
                         static_cast<uint64_t>(progress.num_updates));
    }
  }

  // Buffers that training updates on each rank from its own batches (BatchNorm's running
  // statistics) take rank 0's values, which are the ones it saves.
  void synchronise_buffers() {
    if (!dist) return;
    std::vector<torch::Tensor> buffers;
    for (auto& b : task->model().buffers()) buffers.push_back(b);
    if (!buffers.empty()) dist->broadcast(buffers, 0, "the broadcast of rank 0's buffers");
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
    leanseq::set_compute_threads(opt.threads);
    const auto env = DistributedEnv::from_environment();
    device = checkpoint::resolve_device(opt.device, "device", env ? env->local_rank : 0);
    io::make_dirs(opt.save_dir);
    // checkpoint.restore_file, when set, is where the run resumes from (fairseq's --restore-file).
    const std::string last = opt.restore_file.empty() ? opt.save_dir + "/checkpoint_last.pt" : opt.restore_file;
    if (!opt.restore_file.empty() && !io::file_exists(last)) {
      throw ConfigError("checkpoint.restore_file: " + last + " does not exist");
    }
    join_process_group(env);
    std::optional<checkpoint::Checkpoint> ck;
    if ((resume || !opt.restore_file.empty()) && io::file_exists(last)) ck = checkpoint::read_checkpoint(last, device);
    torch::manual_seed(static_cast<uint64_t>(opt.seed));
    task->setup(ck ? &*ck : nullptr, last);
    log_sums.assign(task->sum_count(), 0.0);
    auto& model = task->model();
    model.to(device);
    params = models::unique_parameters(model);
    setup_mixed_precision();
    optimizer = task->make_optimizer(params);
    if (ck) {
      models::load_named_tensors(model, ck->model_tensors, true, last);
      if (ck->optimizer) {
        optimizer->load(*ck->optimizer);
      } else {
        log::info(last + " holds no optimizer state: the optimizer starts afresh");
      }
      progress = ck->progress;
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(ck->rng_state);
      log::info("resumed from " + last + " at epoch " + std::to_string(progress.epoch) + ", update " +
                std::to_string(progress.num_updates));
      if (amp->scaled() && !std::isnan(progress.loss_scale)) {
        amp->loss_scale().restore(progress.loss_scale, progress.loss_scale_good_updates);
        log::info("mixed precision: loss scale " + fmt(amp->scale(), 4, true) + " from the checkpoint");
      }
    }
    synchronise_start();
    if (opt.td.enabled()) {
      td = std::make_unique<nn::TargetedDropout>(opt.td, model);
      log::info("targeted dropout: " + opt.td.summary());
    }
    if (main_process()) log_file.open(opt.save_dir + "/train_log.jsonl", std::ios::app);
    tty = main_process() && opt.log_format == "auto" && isatty(2);
    log::info(task->describe() + "; on " + device.str());
    log::info(device.is_cpu() ? blas_summary() + "; " + kernels::training_products_summary() + "; " + allocator_summary()
                              : blas_summary());
  }

  void setup_mixed_precision() {
    // fairseq's default window: 2^14 updates over the batches one update sees.
    const int64_t window = opt.amp_scale_window > 0 ? opt.amp_scale_window
                                                    : std::max<int64_t>(1, 16384 / (world_size() * opt.update_freq));
    std::string amp_type = opt.amp;
    if (amp_type == "bfloat16" && !device.is_cuda() && !kernels::onednn_cpu_support().avx512bf16) {
      if (main_process()) {
        log::warn("optim.amp=bfloat16: this CPU has no AVX512_BF16, so bfloat16 products would be emulated and "
                  "slower than float32; training in float32");
      }
      amp_type.clear();
    }
    amp = std::make_unique<MixedPrecision>(amp_type, device.is_cuda(), opt.amp_init_scale, window, opt.amp_min_scale);
    if (main_process() && amp->enabled()) log::info("mixed precision: autocast to " + amp_type + " on " + device.str());
  }

  double current_lr() const { return task->learning_rate(progress); }

  // One update over `batches` (this rank's share of the update; possibly none at the end of an
  // epoch). Gradients and loss sums are added over ranks. Returns false when no rank had a
  // token, or when mixed precision skipped the update.
  bool train_step(const std::vector<std::vector<int64_t>>& batches) {
    Timer t;
    task->model().train();
    clear_gradients(params);
    std::vector<double> sums(task->sum_count(), 0.0);  // also on a rank without a batch in this update
    double weight = 0;
    if (td) td->begin_update(progress.num_updates);
    for (const auto& ids : batches) {
      auto r = task->loss(ids, device, *amp);
      amp->scale_loss(r.loss).backward();
      for (size_t i = 0; i < sums.size(); ++i) sums[i] += r.sums.at(i);
      weight += r.weight;
    }
    if (td) td->end_update();  // before the all-reduce: each rank's gradient through its own masks
    if (dist) {
      Timer comm;
      sum_over_ranks(sums, weight);
      dist->all_reduce_gradients(params, static_cast<int64_t>(opt.dist_bucket_mb * 1024 * 1024));
      if (device.is_cuda()) torch::cuda::synchronize(device.index());
      const double c = comm.seconds();
      log_comm_seconds += c, comm_seconds_this_run += c;
    }
    if (weight == 0) return false;
    // Gradients of the summed loss (over all ranks), normalised by its weight (fairseq's sample_size):
    // inside the optimizer's update pass when nothing reads the gradients before it.
    auto* in_update = dynamic_cast<GradientFactor*>(optimizer.get());
    if (in_update && !amp->scaled() && opt.clip_norm <= 0) {
      in_update->multiply_gradients_at_next_step(1.0 / weight);
    } else if (!amp->unscale(params, weight)) {
      if (main_process()) {
        log::info("mixed precision: inf or NaN in the gradients; update skipped, loss scale now " + fmt(amp->scale(), 4, true));
      }
      return false;
    }
    if (opt.clip_norm > 0) torch::nn::utils::clip_grad_norm_(params, opt.clip_norm);
    const double lr = current_lr();
    for (auto& group : optimizer->param_groups()) group.options().set_lr(lr);
    optimizer->step();
    ++progress.num_updates;
    check_weights();
    const double secs = t.seconds();
    weight_this_run += weight;
    train_seconds_this_run += secs;
    for (size_t i = 0; i < sums.size(); ++i) log_sums[i] += sums[i];
    log_weight += weight, log_seconds += secs;
    ++log_updates;
    return true;
  }

  // Adds the statistics and the weight of an update over the ranks (in place).
  void sum_over_ranks(std::vector<double>& sums, double& weight) {
    std::vector<double> v{weight};
    v.insert(v.end(), sums.begin(), sums.end());
    dist->all_reduce_sum(v, "the all-reduce of loss sums");
    weight = v[0];
    std::copy(v.begin() + 1, v.end(), sums.begin());
  }

  void check_weights() {
    if (!dist || opt.dist_check_weights <= 0 || progress.num_updates % opt.dist_check_weights != 0) return;
    const double d = dist->max_difference_from_rank0(params);
    if (d > 0) {
      throw DistributedError("distributed: after update " + std::to_string(progress.num_updates) +
                             " the ranks' weights differ from rank 0's by up to " + fmt(d, 9, true) +
                             " (dist.check_weights); the ranks no longer train one model");
    }
  }

  // `epoch`: the epoch the record speaks of (default: the one in progress).
  void write_record(nlohmann::json rec, int64_t epoch = 0) {
    if (!main_process()) return;
    rec["minutes"] = elapsed() / 60.0;
    rec["epoch"] = epoch > 0 ? epoch : progress.epoch;
    rec["update"] = progress.num_updates;
    log_file << rec.dump() << "\n";
    log_file.flush();
    if (opt.log_format == "json") std::cout << rec.dump() << std::endl;
  }

  void maybe_log(int64_t batch_index, int64_t n_batches) {
    if (!main_process()) return;
    const std::string unit = task->weight_unit();
    const std::string short_unit = unit == "tokens" ? "tok" : unit;
    const double rate = log_seconds > 0 ? log_weight / log_seconds : 0.0;
    if (tty) {
      const double frac = static_cast<double>(batch_index) / static_cast<double>(std::max<int64_t>(n_batches, 1));
      const int width = 20, filled = static_cast<int>(frac * width);
      std::string bar(static_cast<size_t>(filled), '=');
      bar += std::string(static_cast<size_t>(width - filled), ' ');
      const auto stats = log_weight > 0 ? task->train_stats(log_sums, log_weight) : std::vector<Stat>{};
      std::fprintf(stderr, "\repoch %ld [%s] %3d%% | update %ld%s | lr %.2e | %.0f %s/s | %.1f min   ",
                   static_cast<long>(progress.epoch), bar.c_str(), static_cast<int>(frac * 100),
                   static_cast<long>(progress.num_updates), stats.empty() ? "" : stat_text({stats[0]}).c_str(),
                   current_lr(), rate, short_unit.c_str(), elapsed() / 60.0);
      std::fflush(stderr);
    }
    if (progress.num_updates % opt.log_interval != 0 || log_weight == 0) return;
    const auto stats = task->train_stats(log_sums, log_weight);
    nlohmann::json rec{{"type", "train"}};
    for (const auto& st : stats) rec[st.key] = st.value;
    rec["lr"] = current_lr();
    rec[unit + "_per_second"] = rate;
    if (amp->scaled()) rec["loss_scale"] = amp->scale();
    if (dist) rec["allreduce_ms_per_update"] = 1000.0 * log_comm_seconds / static_cast<double>(log_updates);
    write_record(rec);
    if (!tty && opt.log_format != "json" && opt.log_format != "none") {
      log::info("epoch " + std::to_string(progress.epoch) + " | update " + std::to_string(progress.num_updates) +
                stat_text(stats) + " | lr " + fmt(current_lr(), 3, true) + " | " + fmt(rate, 0) + " " + short_unit +
                "/s | " + fmt(elapsed() / 60.0, 1) + " min");
    }
    std::fill(log_sums.begin(), log_sums.end(), 0.0);
    log_weight = log_seconds = log_comm_seconds = 0;
    log_updates = 0;
  }

  Validation validate() {
    nn::ScopedEvalPrune pruned(td.get());
    synchronise_buffers();
    task->model().eval();
    return task->validate(device, dist.get());
  }

  void save(const std::string& name) {
    if (!main_process()) return;
    checkpoint::TrainerProgress p = progress;
    p.elapsed_seconds = elapsed();
    p.loss_scale = amp->scaled() ? amp->scale() : std::numeric_limits<double>::quiet_NaN();
    p.loss_scale_good_updates = amp->scaled() ? amp->loss_scale().good_updates() : 0;
    checkpoint::save_checkpoint(opt.save_dir + "/" + name, task->config_yaml(), task->vocab(), p, task->model(),
                                opt.no_save_optimizer_state ? nullptr : optimizer.get());
  }

  void copy_checkpoint(const std::string& from, const std::string& to) {
    if (!main_process()) return;
    io::atomic_write(opt.save_dir + "/" + to, [&](const std::string& tmp) {
      fs::copy_file(opt.save_dir + "/" + from, tmp, fs::copy_options::overwrite_existing);
    });
  }

  // Validates, logs, and saves checkpoint_last (+ best, + `extra` when given). `finished_epoch`:
  // at the end of an epoch, the one that ended (progress has already moved to the next).
  void validate_and_save(const std::string& extra, int64_t finished_epoch = 0) {
    const bool epoch_end = finished_epoch > 0;
    const int64_t epoch = epoch_end ? finished_epoch : progress.epoch;
    if (tty) std::fprintf(stderr, "\n");
    auto v = validate();
    const bool better = std::isnan(progress.best_metric) ||
                        (task->higher_is_better() ? v.metric > progress.best_metric : v.metric < progress.best_metric);
    if (better) progress.best_metric = v.metric;
    progress.validations_since_best = better ? 0 : progress.validations_since_best + 1;
    nlohmann::json rec{{"type", "valid"}};
    for (const auto& st : v.stats) rec[st.key] = st.value;
    write_record(rec, epoch);
    log::info("valid: epoch " + std::to_string(epoch) + " | update " + std::to_string(progress.num_updates) +
              stat_text(v.stats) + " | best " + task->metric_name() + " " +
              fmt(progress.best_metric, v.stats.empty() ? 3 : v.stats[0].precision));
    task->after_validation(v, better, epoch_end, progress);
    last_valid = v;
    last_validated_update = progress.num_updates;
    if (out_of_patience() && main_process()) {
      log::info("stopping: " + std::to_string(opt.patience) + " validations without a better " + task->metric_name());
    }
    save("checkpoint_last.pt");
    if (better) copy_checkpoint("checkpoint_last.pt", "checkpoint_best.pt");
    if (!extra.empty()) copy_checkpoint("checkpoint_last.pt", extra);
  }

  // Keeps the `keep` newest (-1: all) of the checkpoints checkpoint_<epoch>_<update>.pt (interval) or
  // checkpoint<epoch>.pt (epochs), newest by that last number.
  void prune_checkpoints(int64_t keep, bool interval) {
    if (keep < 0 || !main_process()) return;
    std::vector<std::pair<int64_t, fs::path>> found;
    for (const auto& e : fs::directory_iterator(opt.save_dir)) {
      const std::string n = e.path().filename().string();
      if (n.size() < 14 || n.rfind("checkpoint", 0) != 0 || n.compare(n.size() - 3, 3, ".pt") != 0) continue;
      const std::string number = interval ? n.substr(n.rfind('_') + 1, n.size() - 3 - n.rfind('_') - 1) : n.substr(10, n.size() - 13);
      const bool shape = interval ? n.rfind("checkpoint_", 0) == 0 && n.find('_') != n.rfind('_') : true;
      if (!shape || number.empty() || number.find_first_not_of("0123456789") != std::string::npos) continue;
      found.emplace_back(std::stoll(number), e.path());
    }
    std::sort(found.begin(), found.end());
    while (static_cast<int64_t>(found.size()) > keep) {
      fs::remove(found.front().second);
      found.erase(found.begin());
    }
  }

  // After an update: interval checkpoints and validations (an update that mixed precision
  // skipped counts for neither).
  void after_update(bool updated) {
    if (!updated) return;
    if (opt.save_interval_updates > 0 && progress.num_updates % opt.save_interval_updates == 0) {
      validate_and_save("checkpoint_" + std::to_string(progress.epoch) + "_" + std::to_string(progress.num_updates) + ".pt");
      prune_checkpoints(opt.keep_interval_updates, true);
    } else if (opt.validate_interval_updates > 0 && progress.num_updates % opt.validate_interval_updates == 0) {
      validate_and_save("");
    }
  }

  TrainOutcome run();
};

TrainOutcome Trainer::Impl::run() {
  TrainOutcome out;
  install_stop_handlers();
  task->begin_epoch(progress.epoch);
  auto sorted_batches = task->train_batches();
  // Limits already reached when a resumed run starts (rank 0's checkpoint: the same on every rank).
  bool stop = max_update_reached() || max_minutes_reached() || max_epoch_passed();
  while (!stop) {
    if (task->begin_epoch(progress.epoch)) sorted_batches = task->train_batches();
    auto batches = sorted_batches;
    data::shuffle_batches(batches, static_cast<uint64_t>(opt.seed) * 1000003ULL + static_cast<uint64_t>(progress.epoch));
    const int64_t n = static_cast<int64_t>(batches.size());
    // An update consumes update_freq batches per rank: rank r takes every world_size-th of them
    // from the r-th on, so W ranks with update_freq U see the batches of one process with W * U.
    const int64_t per_update = opt.update_freq * world_size();
    while (progress.batch_in_epoch < n) {
      std::vector<std::vector<int64_t>> group;
      for (int64_t k = rank(); k < per_update && progress.batch_in_epoch + k < n; k += world_size()) {
        group.push_back(batches[progress.batch_in_epoch + k]);
      }
      progress.batch_in_epoch = std::min(n, progress.batch_in_epoch + per_update);
      after_update(train_step(group));
      maybe_log(progress.batch_in_epoch, n);
      const auto st = stop_state();
      if (int sig = st.signal) {
        if (tty) std::fprintf(stderr, "\n");
        if (main_process()) log::warn("signal " + std::to_string(sig) + " received: saving checkpoint_last.pt and stopping");
        save("checkpoint_last.pt");
        out.signal = sig;
        stop = true;
        break;
      }
      if (max_update_reached() || st.time_up || out_of_patience()) {
        stop = true;
        break;
      }
    }
    if (out.signal) break;
    if (progress.batch_in_epoch >= n) {
      // End of epoch: the next one starts from its first batch.
      const int64_t finished = progress.epoch;
      ++progress.epoch;
      progress.batch_in_epoch = 0;
      ++out.epochs_done;
      validate_and_save(opt.no_epoch_checkpoints ? "" : "checkpoint" + std::to_string(finished) + ".pt", finished);
      prune_checkpoints(opt.keep_last_epochs, false);
      if (max_epoch_passed() || out_of_patience()) stop = true;
    } else if (stop && last_validated_update != progress.num_updates) {
      validate_and_save("");
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  if (!out.signal && main_process()) task->finish(opt.save_dir, device);
  out.num_updates = progress.num_updates;
  out.best_metric = progress.best_metric;
  out.last_valid_loss = last_valid.loss;
  out.last_valid_bleu = last_valid.bleu;
  out.train_target_tokens = static_cast<int64_t>(weight_this_run);
  out.train_seconds = train_seconds_this_run;
  out.comm_seconds = comm_seconds_this_run;
  out.train_tokens_per_second = train_seconds_this_run > 0 ? weight_this_run / train_seconds_this_run : 0;
  return out;
}

Trainer::Trainer(std::unique_ptr<Task> task, const checkpoint::TrainLoopOptions& options, bool resume)
    : impl_(std::make_unique<Impl>()) {
  impl_->task = std::move(task);
  impl_->opt = options;
  impl_->setup(resume);
}

Trainer::Trainer(checkpoint::RunConfig cfg, bool resume) : Trainer(std::make_unique<TranslationTask>(cfg), cfg, resume) {}

Trainer::~Trainer() = default;

TrainOutcome Trainer::run() { return impl_->run(); }

Task& Trainer::task() { return *impl_->task; }

}  // namespace leanseq::train
