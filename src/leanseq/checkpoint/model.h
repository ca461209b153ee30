// A sequence model rebuilt from a checkpoint alone, with what inference needs: its architecture,
// vocabularies and text pipeline files, and the type its weights were stored in. The training
// settings the checkpoint also holds (optimizer, schedule, data) are read only by who asks for them
// (training_config).
#pragma once
#include <memory>
#include <string>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/run_config.h"
#include "leanseq/kernels/compute_type.h"
#include "leanseq/models/seq2seq.h"

namespace leanseq::checkpoint {

struct LoadedModel {
  std::shared_ptr<models::Seq2SeqModel> model;
  std::string arch;                                         // the registry's name, e.g. transformer_small
  std::shared_ptr<const models::ModelConfig> model_config;  // the architecture's resolved settings
  VocabFiles vocab;
  int64_t src_vocab_size = 0, tgt_vocab_size = 0;
  kernels::ComputeType storage = kernels::ComputeType::float32;
};
// A model trained with targeted dropout (td.eval_prune) comes pruned as it was evaluated, unless
// `dense` asks for the weights as trained.
LoadedModel load_model(const std::string& path, bool dense = false);
// The same from a checkpoint already read (`origin`: its file, for messages).
LoadedModel load_model(const Checkpoint& ck, const std::string& origin, bool dense = false);

// The whole run config a sequence model's checkpoint was trained with (`origin`: its file).
RunConfig training_config(const Checkpoint& ck, const std::string& origin);

}  // namespace leanseq::checkpoint
