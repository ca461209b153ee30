#include "leanseq/checkpoint/loop_options.h"

#include <torch/torch.h>

#include "leanseq/core/error.h"
#include "leanseq/core/threads.h"

namespace leanseq::checkpoint {

void AdamSettings::visit(ConfigVisitor& v, const char* weight_decay_help) {
  v.field("optim.adam_beta1", beta1, "Adam beta1", Range::half_open(0, 1));
  v.field("optim.adam_beta2", beta2, "Adam beta2", Range::half_open(0, 1));
  v.field("optim.adam_eps", eps, "Adam epsilon", Range::at_least(0));
  v.field("optim.weight_decay", weight_decay, weight_decay_help, Range::at_least(0));
}

torch::optim::AdamOptions AdamSettings::options(double lr) const {
  torch::optim::AdamOptions ao(lr);
  ao.betas({beta1, beta2}).eps(eps).weight_decay(weight_decay);
  return ao;
}

void TrainLoopOptions::visit_loop(ConfigVisitor& v) {
  v.field("save_dir", save_dir, "where checkpoints and the training log go");
  v.field("seed", seed, "random seed");
  v.field("threads", threads, kComputeThreadsHelp, Range::at_least(0));
  v.field("device", device, "where to train: cpu, cuda or cuda:N (CUDA builds; distributed runs: cuda is cuda:LOCAL_RANK)");
  v.field("optim.clip_norm", clip_norm, "clip the global gradient norm (0: off)", Range::at_least(0));
  v.field("optim.update_freq", update_freq, "accumulate gradients over N batches per update", Range::at_least(1));
  v.field("optim.amp", amp,
          "mixed precision: float16 (CUDA: autocast with loss scaling, fairseq's --amp) or bfloat16 (autocast, CUDA or a CPU with AVX512_BF16); empty: float32");
  v.field("optim.amp_init_scale", amp_init_scale, "float16: the first loss scale", Range::above(0));
  v.field("optim.amp_scale_window", amp_scale_window,
          "float16: updates without overflow before the loss scale doubles (0: 2^14 / (ranks x update_freq))", Range::at_least(0));
  v.field("optim.amp_min_scale", amp_min_scale, "float16: stop when the loss scale falls below this", Range::above(0));
  td.visit(v, "td.");
  v.field("stop.max_epoch", max_epoch, "stop after N epochs (0: no limit)", Range::at_least(0));
  v.field("stop.max_update", max_update, "stop after N updates (0: no limit)", Range::at_least(0));
  v.field("stop.max_minutes", max_minutes, "stop after N minutes of wall-clock time (0: no limit)", Range::at_least(0));
  v.field("stop.patience", patience,
          "stop after N validations in a row without a better best metric (seq2seq: checkpoint.best_metric; "
          "classify: accuracy; fairseq's --patience; 0: never)", Range::at_least(0));
  v.field("checkpoint.save_interval_updates", save_interval_updates, "also save every N updates", Range::at_least(0));
  v.field("checkpoint.keep_interval_updates", keep_interval_updates, "keep the last N update checkpoints (-1: all)", Range::at_least(-1));
  v.field("checkpoint.keep_last_epochs", keep_last_epochs, "keep the last N epoch checkpoints (-1: all)", Range::at_least(-1));
  v.field("checkpoint.no_epoch_checkpoints", no_epoch_checkpoints, "only keep checkpoint_last/best");
  v.field("checkpoint.no_save_optimizer_state", no_save_optimizer_state,
          "save checkpoints without the optimizer's state (smaller; a run resumed from one starts its optimizer afresh)");
  v.field("checkpoint.restore_file", restore_file,
          "resume from this checkpoint (model, optimizer, progress) instead of <save_dir>/checkpoint_last.pt");
  v.field("log.interval", log_interval, "log every N updates", Range::at_least(1));
  v.field("log.format", log_format, "auto, text, json or none (no per-interval lines, as fairseq's --log-format none)");
  v.field("valid.interval_updates", validate_interval_updates, "also validate every N updates (0: per epoch only)", Range::at_least(0));
  v.field("dist.timeout", dist_timeout,
          "distributed runs: seconds to wait for every rank at the rendezvous and in each collective", Range::above(0));
  v.field("dist.bucket_mb", dist_bucket_mb, "distributed runs: MiB of gradients per all-reduce bucket", Range::above(0));
  v.field("dist.check_weights", dist_check_weights,
          "distributed runs: every N updates, check that every rank holds rank 0's weights (0: never)", Range::at_least(0));
}

void TrainLoopOptions::validate_loop() const {
  auto bad = [](const std::string& msg) { throw ConfigError(msg); };
  if (!amp.empty() && amp != "float16" && amp != "bfloat16") {
    bad("optim.amp: expected float16 or bfloat16 (or empty for float32), got '" + amp + "'");
  }
  if (amp == "float16" && device.rfind("cuda", 0) != 0) {
    bad("optim.amp: float16 trains on CUDA only (device is " + device + "); on the CPU use bfloat16 (--bf16)");
  }
  if (log_format != "auto" && log_format != "text" && log_format != "json" && log_format != "none") {
    bad("log.format must be auto, text, json or none");
  }
  check_device_name(device);
  td.validate();
}

void check_device_name(const std::string& device, const std::string& key) {
  bool known_device = false;
  try {
    torch::Device d(device);
    known_device = d.is_cpu() || d.is_cuda();
  } catch (const std::exception&) {
  }
  if (!known_device) throw ConfigError(key + ": '" + device + "' is not cpu, cuda or cuda:N");
}

torch::Device resolve_device(const std::string& name, const std::string& key, int default_index) {
  check_device_name(name, key);
  torch::Device d(name);
  if (!d.is_cuda()) return d;
  if (!torch::cuda::is_available()) {
    throw ConfigError(key + ": " + name + ": no CUDA GPU is visible (or this LibTorch has no CUDA)");
  }
  if (!d.has_index()) d = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(default_index));
  if (d.index() >= static_cast<int>(torch::cuda::device_count())) {
    throw ConfigError(key + ": " + d.str() + ": this machine has " + std::to_string(torch::cuda::device_count()) +
                      " GPU(s)");
  }
  return d;
}

}  // namespace leanseq::checkpoint
