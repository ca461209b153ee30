#include <cstdlib>
#include <optional>
#include <iostream>

#include "leanseq/checkpoint/operations.h"
#include "leanseq/checkpoint/run_config.h"
#include "leanseq/cli/commands.h"
#include "leanseq/cli/fairseq_flags.h"
#include "leanseq/core/config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/threads.h"
#include "leanseq/train/classification_task.h"
#include "leanseq/train/launcher.h"
#include "leanseq/train/trainer.h"

namespace leanseq::cli {

namespace {
std::vector<std::string> g_program_args;
}  // namespace

void set_program_args(int argc, char** argv) { g_program_args.assign(argv, argv + argc); }
const std::vector<std::string>& program_args() { return g_program_args; }

namespace {
struct TrainArgs {
  std::vector<std::string> configs, sets;
  std::string task, arch, data, save_dir, log_format, device, amp_dtype;
  double max_minutes = -1;
  int64_t max_update = -1, max_epoch = -1, seed = -1, threads = -1, nproc = 1, patience = -1, update_freq = 0;
  bool resume = false, amp = false, bf16 = false, list_keys = false;
};

// A Markdown table of a config's keys: what `train --list-keys` prints and docs/reference/config.md holds.
void print_keys(const std::vector<ConfigKey>& keys) {
  auto cell = [](std::string s) {
    for (size_t p = 0; (p = s.find('|', p)) != std::string::npos; p += 2) s.replace(p, 1, "\\|");
    return s;
  };
  std::cout << "| key | type | default | help |\n|---|---|---|---|\n";
  for (const auto& k : keys) {
    std::cout << "| `" << k.key << "` | " << k.type << " | " << (k.value.empty() ? "" : "`" + cell(k.value) + "`")
              << " | " << cell(k.help) << " |\n";
  }
}
}  // namespace

int train_seq2seq(const checkpoint::RunConfig& cfg, bool resume) {
  train::Trainer trainer(cfg, resume);
  auto out = trainer.run();
  std::string comm;
  if (out.comm_seconds > 0 && out.num_updates > 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "; all-reduce %.1f ms per update (%.1f%% of training time)",
                  1000.0 * out.comm_seconds / static_cast<double>(out.num_updates),
                  100.0 * out.comm_seconds / out.train_seconds);
    comm = buf;
  }
  log::info("done: " + std::to_string(out.num_updates) + " updates, " +
            std::to_string(static_cast<int64_t>(out.train_tokens_per_second)) + " target tokens/s" + comm);
  return out.signal ? 128 + out.signal : 0;
}

namespace {
// The run's config values: the YAML files, then --set, then the flags (each named as its source),
// then fairseq's spellings.
ConfigValues train_values(const TrainArgs& a, const FairseqFlagValues& fairseq) {
  ConfigValues values;
  for (const auto& f : a.configs) values.merge(load_yaml_file(f));
  values.merge(parse_assignments(a.sets, "--set"));
  auto flag = [&](const char* key, const std::string& v) { values.set(key, v, std::string("--") + key); };
  if (!a.task.empty()) flag("task", a.task);
  if (!a.arch.empty()) flag("arch", a.arch);
  if (!a.data.empty()) flag("data", a.data);
  if (!a.save_dir.empty()) flag("save_dir", a.save_dir);
  if (!a.log_format.empty()) flag("log.format", a.log_format);
  if (!(a.max_minutes < 0)) flag("stop.max_minutes", std::to_string(a.max_minutes));  // NaN too: refused there
  if (a.max_update >= 0) flag("stop.max_update", std::to_string(a.max_update));
  if (a.max_epoch >= 0) flag("stop.max_epoch", std::to_string(a.max_epoch));
  if (a.patience >= 0) flag("stop.patience", std::to_string(a.patience));
  if (a.update_freq > 0) flag("optim.update_freq", std::to_string(a.update_freq));
  if (!a.device.empty()) flag("device", a.device);
  if (a.bf16 && (a.amp || !a.amp_dtype.empty()) && a.amp_dtype != "bfloat16") {
    throw ConfigError("--bf16 asks for bfloat16 and --amp for float16: give one of them");
  }
  const std::string amp_type = a.bf16 ? "bfloat16" : !a.amp_dtype.empty() ? a.amp_dtype : a.amp ? "float16" : "";
  if (!amp_type.empty()) flag("optim.amp", amp_type);
  if (a.seed >= 0) flag("seed", std::to_string(a.seed));
  if (a.threads >= 0) flag("threads", std::to_string(a.threads));
  apply_fairseq_training_flags(fairseq, values);
  return values;
}

// This command line (without --nproc) run by `nproc` local worker processes; their exit code.
int launch_workers(int64_t nproc) {
  if (std::getenv("WORLD_SIZE")) {
    throw ConfigError("--nproc: WORLD_SIZE is set, so a launcher already started this process as a worker; "
                      "leave --nproc out");
  }
  // The workers run this command line without --nproc.
  std::vector<std::string> argv;
  const auto& all = program_args();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == "--nproc") {
      ++i;
    } else if (all[i].rfind("--nproc=", 0) != 0) {
      argv.push_back(all[i]);
    }
  }
  return train::launch_local_workers(static_cast<int>(nproc), argv, std::chrono::seconds(30));
}

// A text classifier trained; the exit code.
int run_classifier_training(const checkpoint::ClassifyConfig& cfg, bool resume) {
  auto out = train::train_classifier(cfg, resume);
  char buf[200];
  std::snprintf(buf, sizeof buf, "done: %lld updates, %.0f examples/s, best valid accuracy %.2f%%",
                static_cast<long long>(out.num_updates), out.examples_per_second, 100 * out.best_valid_accuracy);
  std::string line = buf;
  if (out.test) {
    std::snprintf(buf, sizeof buf, ", test accuracy %.2f%%", 100 * out.test->accuracy);
    line += buf;
  }
  log::info(line);
  return out.signal ? 128 + out.signal : 0;
}
}  // namespace

void add_train(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<TrainArgs>();
  auto fairseq = std::make_shared<FairseqFlagValues>();
  auto* sub = app.add_subcommand("train", "train a model (YAML config files, --set key=value, flags)");
  sub->add_option("--config,-c", a->configs, "YAML config file(s), applied in order");
  sub->add_option("--set", a->sets, "override one key: --set optim.lr=7e-4 (repeatable)");
  sub->add_option("--task", a->task, "seq2seq (default: translation, language models) or classify (text classification on TSV files)");
  sub->add_option("--arch,-a", a->arch, "model preset (leanseq list-archs)");
  sub->add_option("--data", a->data,
                  "directory written by leanseq prepare or fairseq-preprocess, or shard directories a:b:c read one per "
                  "epoch in turn (data)");
  sub->add_option("--save-dir", a->save_dir, "checkpoint directory");
  sub->add_option("--max-minutes", a->max_minutes, "stop after this much wall-clock time");
  sub->add_option("--max-update", a->max_update, "stop after this many updates");
  sub->add_option("--max-epoch", a->max_epoch, "stop after this many epochs");
  sub->add_option("--patience", a->patience,
                  "stop after N validations in a row without a better best metric (stop.patience; both tasks)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--update-freq", a->update_freq,
                  "accumulate gradients over N batches per update (optim.update_freq; both tasks)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--device", a->device, "cpu, cuda or cuda:N (device)");
  sub->add_flag("--amp", a->amp,
                "mixed precision on CUDA: float16 autocast with a dynamic loss scale (optim.amp; fairseq's --amp; both tasks)");
  sub->add_option("--amp-dtype", a->amp_dtype, "the type --amp computes in (implies --amp)")
      ->check(CLI::IsMember({"float16", "bfloat16"}));
  sub->add_flag("--bf16", a->bf16,
                "mixed precision in bfloat16 (optim.amp=bfloat16): on CUDA, or on a CPU with AVX512_BF16 (else float32)");
  sub->add_option("--seed", a->seed, "random seed");
  sub->add_option("--threads", a->threads, kComputeThreadsHelp);
  sub->add_option("--log-format", a->log_format, "auto, text or json");
  sub->add_flag("--resume", a->resume, "continue from <save-dir>/checkpoint_last.pt");
  sub->add_flag("--list-keys", a->list_keys,
                "print every config key of the run the other options describe (--arch, --task, -c, --set) with its "
                "type, value and help, as a Markdown table, and exit");
  sub->add_option("--nproc", a->nproc,
                  "data-parallel training in N worker processes on this machine, both tasks (under torchrun or "
                  "another launcher that sets RANK and WORLD_SIZE, leave it out)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  add_fairseq_training_flags(sub, fairseq);
  sub->callback([a, fairseq, &exit_code] {
    const auto values = train_values(*a, *fairseq);
    auto task = values.values.find("task");
    const bool classify = task != values.values.end() && task->second == "classify";
    if (a->list_keys) {
      print_keys(checkpoint::run_config_keys(values));
      return;
    }
    if (classify && !a->data.empty()) {
      throw ConfigError("--data: classify reads data.train/data.valid/data.test (TSV files); use --set data.train=FILE");
    }
    // The config is checked here, before any worker starts.
    std::optional<checkpoint::ClassifyConfig> classify_cfg;
    std::optional<checkpoint::RunConfig> cfg;
    if (classify) {
      classify_cfg = checkpoint::resolve_classify_config(values);
    } else {
      cfg = checkpoint::resolve_run_config(values);
    }
    if (a->nproc > 1) {
      exit_code = launch_workers(a->nproc);
    } else {
      exit_code = classify ? run_classifier_training(*classify_cfg, a->resume) : train_seq2seq(*cfg, a->resume);
    }
  });
}

}  // namespace leanseq::cli
