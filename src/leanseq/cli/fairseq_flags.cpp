#include "leanseq/cli/fairseq_flags.h"

#include <cstdio>
#include <vector>

#include "leanseq/core/error.h"

namespace leanseq::cli {

namespace {
struct FairseqFlag {
  const char* flag;
  const char* key;  // the config key it sets ("" for the ones translated in apply_...)
  bool takes_value;
  const char* help;
};

const std::vector<FairseqFlag>& flags() {
  static const std::vector<FairseqFlag> table = {
      {"--lr", "optim.lr", true, "peak learning rate (optim.lr; one value)"},
      {"--lr-scheduler", "optim.lr_scheduler", true, "inverse_sqrt or fixed (optim.lr_scheduler)"},
      {"--warmup-updates", "optim.warmup_updates", true, "linear warm-up updates (optim.warmup_updates)"},
      {"--warmup-init-lr", "optim.warmup_init_lr", true, "learning rate at update 0 (optim.warmup_init_lr)"},
      {"--optimizer", "optim.optimizer", true, "adam or nag (optim.optimizer)"},
      {"--adam-betas", "", true, "Adam's betas as fairseq writes them, '(0.9, 0.98)' (optim.adam_beta1/2)"},
      {"--adam-eps", "optim.adam_eps", true, "Adam's epsilon (optim.adam_eps)"},
      {"--momentum", "optim.momentum", true, "NAG momentum (optim.momentum)"},
      {"--weight-decay", "optim.weight_decay", true, "weight decay (optim.weight_decay)"},
      {"--clip-norm", "optim.clip_norm", true, "gradient norm clipping, 0: none (optim.clip_norm)"},
      {"--label-smoothing", "criterion.label_smoothing", true, "label smoothing (criterion.label_smoothing)"},
      {"--dropout", "model.dropout", true, "dropout (model.dropout)"},
      {"--attention-dropout", "model.attention_dropout", true, "attention dropout (model.attention_dropout)"},
      {"--activation-dropout", "model.activation_dropout", true, "activation dropout (model.activation_dropout)"},
      {"--max-tokens", "batch.max_tokens", true, "padded tokens per batch (batch.max_tokens)"},
      {"--batch-size", "batch.max_sentences", true, "sentences per batch (batch.max_sentences)"},
      {"--stop-time-hours", "", true, "stop after this many hours (stop.max_minutes x 60)"},
      {"--save-interval-updates", "checkpoint.save_interval_updates", true,
       "also save every N updates (checkpoint.save_interval_updates)"},
      {"--keep-interval-updates", "checkpoint.keep_interval_updates", true,
       "keep the last N update checkpoints (checkpoint.keep_interval_updates)"},
      {"--keep-last-epochs", "checkpoint.keep_last_epochs", true,
       "keep the last N epoch checkpoints (checkpoint.keep_last_epochs)"},
      {"--restore-file", "checkpoint.restore_file", true,
       "resume from this checkpoint instead of <save-dir>/checkpoint_last.pt (checkpoint.restore_file)"},
      {"--no-epoch-checkpoints", "checkpoint.no_epoch_checkpoints", false,
       "only checkpoint_last/best (checkpoint.no_epoch_checkpoints)"},
      {"--no-save-optimizer-state", "checkpoint.no_save_optimizer_state", false,
       "checkpoints without the optimizer's state (checkpoint.no_save_optimizer_state)"},
      {"--validate-interval-updates", "valid.interval_updates", true, "also validate every N updates (valid.interval_updates)"},
      {"--log-interval", "log.interval", true, "log every N updates (log.interval)"},
  };
  return table;
}

double number(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const double d = std::stod(v, &used);
    if (used == v.size()) return d;
  } catch (const std::exception&) {
  }
  throw ConfigError(flag + ": expected a number, got '" + v + "'");
}
}  // namespace

void add_fairseq_training_flags(CLI::App* sub, const std::shared_ptr<FairseqFlagValues>& given) {
  for (const auto& f : flags()) {
    const std::string name = f.flag;
    if (f.takes_value) {
      sub->add_option_function<std::string>(name, [given, name](const std::string& v) { (*given)[name] = v; }, f.help)
          ->group("fairseq's spellings")
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else {
      sub->add_flag_function(name, [given, name](int64_t) { (*given)[name] = "true"; }, f.help)
          ->group("fairseq's spellings");
    }
  }
}

void apply_fairseq_training_flags(const FairseqFlagValues& given, ConfigValues& values) {
  for (const auto& f : flags()) {
    const auto it = given.find(f.flag);
    if (it == given.end()) continue;
    const std::string& v = it->second;
    const std::string flag = f.flag;
    if (flag == "--adam-betas") {
      double b1 = 0, b2 = 0;
      char close = 0;
      if (std::sscanf(v.c_str(), " (%lf , %lf %c", &b1, &b2, &close) != 3 || close != ')') {
        throw ConfigError("--adam-betas: expected '(beta1, beta2)' as fairseq takes it, got '" + v + "'");
      }
      values.set("optim.adam_beta1", std::to_string(b1), flag);
      values.set("optim.adam_beta2", std::to_string(b2), flag);
    } else if (flag == "--stop-time-hours") {
      values.set("stop.max_minutes", std::to_string(number(flag, v) * 60), flag);
    } else {
      values.set(f.key, v, flag);
    }
  }
}

}  // namespace leanseq::cli
