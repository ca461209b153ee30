// What `leanseq serve` serves: its --checkpoint, its --model NAME=CHECKPOINT flags or its --models
// YAML file, as a checked list of models with their workers and compute types.
#pragma once
#include <string>
#include <vector>

#include "leanseq/kernels/compute_type.h"

namespace leanseq::cli {

struct ModelSpec {
  std::string name, checkpoint;  // checkpoint: A.pt[:B.pt...] (an ensemble)
  int workers = 1;
  kernels::ComputeTypeRequest compute_type = kernels::ComputeTypeRequest::default_;
  std::string source, target;  // the language pair it is served as ("": its dictionaries' names)
};

// Exactly one of `checkpoint`, `model_flags` and `models_file` is given, or `argos_packages` alone
// or with one of the last two (ConfigError otherwise). The file is a YAML list of {name,
// checkpoint, workers, compute_type, source, target}, all but the first two optional (defaults:
// `workers`, `compute_type`, the checkpoint's language names). `argos_packages` adds each Argos
// Translate package of that directory, named by its folder or file, served as its metadata's
// language pair. Names are unique, 1-64 letters, digits, '.', '_' or '-'; errors name the flag, or
// the file and the entry.
std::vector<ModelSpec> model_specs(const std::string& checkpoint, const std::vector<std::string>& model_flags,
                                   const std::string& models_file, const std::string& argos_packages, int workers,
                                   kernels::ComputeTypeRequest compute_type);

}  // namespace leanseq::cli
