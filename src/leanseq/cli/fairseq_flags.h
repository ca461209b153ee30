// fairseq's spellings of training hyper-parameters, accepted by `leanseq train` beside --set:
// each names one config key (or two: --adam-betas) with fairseq's meaning, so that a fairseq
// command line's numbers carry over (`--lr 5e-4 --warmup-updates 4000 --dropout 0.3`).
#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <string>

#include "leanseq/core/config.h"

namespace leanseq::cli {

// The flags given, by name ("--lr" -> "5e-4"; a flag without a value -> "true").
using FairseqFlagValues = std::map<std::string, std::string>;

// Adds the flags to `sub`, under the group "fairseq's spellings"; what is given lands in `given`.
void add_fairseq_training_flags(CLI::App* sub, const std::shared_ptr<FairseqFlagValues>& given);

// Sets their config keys in `values` (after YAML files and --set: a flag wins); ConfigError naming
// the flag for a value it cannot take (--adam-betas not "(b1, b2)", --stop-time-hours not a number).
void apply_fairseq_training_flags(const FairseqFlagValues& given, ConfigValues& values);

}  // namespace leanseq::cli
