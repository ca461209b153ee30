// The checkpoint file: the resolved config (YAML text), vocabularies (dictionaries and SentencePiece
// models, so that `translate` needs nothing else), model tensors and the type they are stored in,
// and what training adds to resume (optimizer state, progress, RNG state), written atomically
// (temporary file + rename). Every record's CRC32 is checked before it is read.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>

#include "leanseq/core/config.h"
#include "leanseq/kernels/compute_type.h"
#include "leanseq/models/seq2seq.h"

namespace leanseq::checkpoint {

struct TrainerProgress {
  int64_t epoch = 1;           // the epoch in progress
  int64_t batch_in_epoch = 0;  // batches of this epoch already consumed
  int64_t num_updates = 0;
  double best_metric = std::numeric_limits<double>::quiet_NaN();
  double elapsed_seconds = 0;  // training wall time before this run segment
  int64_t lr_shrinks = 0;      // plateau shrinks of a fixed schedule so far
  double best_valid_loss = std::numeric_limits<double>::quiet_NaN();  // over end-of-epoch validations
  int64_t validations_since_best = 0;  // classify: for the patience and LR shrink rules
  // float16 training (optim.amp): the loss scale and its count of good updates in a row, so that
  // a resumed run goes on with them (fairseq keeps them in its optimizer state); NaN: none.
  double loss_scale = std::numeric_limits<double>::quiet_NaN();
  int64_t loss_scale_good_updates = 0;
};

// Text and bytes that make a checkpoint self-contained.
struct VocabFiles {
  std::string src_lang, tgt_lang;
  std::string src_dict, tgt_dict;  // dict.txt contents
  std::string src_spm, tgt_spm;    // SentencePiece model bytes
  bool joint = false;
  // Instead of SentencePiece (imported models): "moses", Moses tokenization of src_lang/tgt_lang
  // text, then BPE with `bpe_codes` (subword-nmt's codes file) when it is not empty.
  std::string tokenizer, bpe_codes;
  // How a source sentence is framed for the encoder: fairseq's models end it with </s>; models
  // imported from CTranslate2 may want <s> before it and no </s> after it (add_source_bos/eos).
  bool source_bos = false, source_eos = true;
  // Whether the search ends hypotheses at the length limit as CTranslate2 does, for the models
  // imported from it (decode::SearchOptions::max_len_cuts), or as fairseq does.
  bool max_len_cuts = false;
};

struct Checkpoint {
  std::string config_yaml;
  VocabFiles vocab;
  TrainerProgress progress;
  std::map<std::string, torch::Tensor> model_tensors;  // fairseq-style names
  std::optional<torch::serialize::InputArchive> optimizer;
  torch::Tensor rng_state;
  kernels::ComputeType storage = kernels::ComputeType::float32;  // how the weights were stored
  std::string writer;  // "leanseq X.Y.Z" that wrote it (empty: a version before 0.2.0)
};

// `storage` other than float32 stores the weights (floating tensors of two or more dimensions and
// at least kMinQuantizedSize elements: linear layers, embeddings, output projections,
// convolutions) in that type: int8 with a float32 scale per slice of the first dimension
// (per output row of a linear layer, per token of an embedding), or bfloat16/float16. Biases and
// normalisation stay float32. Reading dequantizes them to float32.
void save_checkpoint(const std::string& path, const std::string& config_yaml, const VocabFiles& vocab,
                     const TrainerProgress& progress, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                     kernels::ComputeType storage = kernels::ComputeType::float32);
constexpr int64_t kMinQuantizedSize = 1024;

// Throws CheckpointError naming the file when it is missing, truncated or not a checkpoint. The
// model and optimizer tensors land on `device`, wherever they were saved from.
Checkpoint read_checkpoint(const std::string& path, const torch::Device& device = torch::kCPU);

// Whether a checkpoint's config is that of a text classifier (task: classify) rather than a sequence model.
bool is_classifier_config(const ConfigValues& config);
// The same for the checkpoint at `path` (CheckpointError naming it when it cannot be read).
bool is_classifier_checkpoint(const std::string& path);

// Writes `bytes` to a file (atomically).
void write_bytes(const std::string& path, const std::string& bytes);

}  // namespace leanseq::checkpoint
