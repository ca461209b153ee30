// Operations on checkpoint files that `leanseq average`, `leanseq quantize` and Python share.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "leanseq/core/config.h"
#include "leanseq/kernels/compute_type.h"

namespace leanseq::checkpoint {

// The last `n` checkpoints of `dir`: by epoch (checkpoint<E>.pt) or, with `by_updates`, by update
// (checkpoint_<E>_<U>.pt), as fairseq's average_checkpoints.py picks them; newest first.
// DataError when fewer are there.
std::vector<std::string> last_checkpoints(const std::string& dir, int64_t n, bool by_updates);

// Writes to `output` the mean of the model parameters of `inputs` (in float64, stored in each
// tensor's type), with the first input's config, vocabularies and progress and no optimizer
// state. CheckpointError naming the file when a tensor is missing or has another shape.
void average_checkpoints(const std::vector<std::string>& inputs, const std::string& output);

// The keys of the training run `values` describe, with the values they resolve to (a preset's
// with "arch"), unchecked: a ClassifyConfig's for task classify, else a RunConfig's.
// `train --list-keys` and Python's config_keys print them.
std::vector<ConfigKey> run_config_keys(const ConfigValues& values);

// The types quantize stores weights in, by name: int8, bfloat16 (bf16), float16 (fp16).
const std::map<std::string, kernels::ComputeType>& quantized_storage_types();

struct QuantizeReport {
  uintmax_t bytes = 0;          // the file written
  uintmax_t float32_bytes = 0;  // the model's weights in float32
};
// Writes `input`'s sequence model to `output` with its weights stored in `type` (int8, bfloat16 or
// float16; file.h's save_checkpoint says which tensors), without optimizer state. ConfigError for
// a text classifier.
QuantizeReport quantize_checkpoint(const std::string& input, const std::string& output, kernels::ComputeType type);

}  // namespace leanseq::checkpoint
