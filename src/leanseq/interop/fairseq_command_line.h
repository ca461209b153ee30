// What fairseq's command lines name besides decoding options, for leanseq's fairseq-interactive,
// fairseq-generate and fairseq-train: the text pipeline of --bpe and --tokenizer, the models of
// --path (fairseq's imported, leanseq's taken as they are), and the model options fairseq-train's
// own parser leaves to the architecture.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "leanseq/interop/fairseq.h"

namespace leanseq::interop {

// fairseq's flags that name the text pipeline, as every command takes them.
struct FairseqPipelineFlags {
  std::string bpe, spm, tokenizer, bpe_codes;  // --bpe, --sentencepiece-model, --tokenizer, --bpe-codes
  bool moses_no_dash_splits = false, moses_no_escape = false;
};

// A SentencePiece model, or a tokenizer (text::TokenizerSpec: fairseq's Moses, or none) with
// optional subword-nmt or fastBPE codes; `given` false when the flags name none (the text is the
// model's subwords).
struct FairseqPipeline {
  std::string spm, tokenizer = "none", bpe_codes;
  bool given = false;
};
// The pipeline the flags name, checked: ConfigError for a wrong combination, or codes of the other
// BPE's format.
FairseqPipeline fairseq_pipeline(const FairseqPipelineFlags& flags);

// --path (colon-separated checkpoints), the data directory with the dictionaries, the languages.
struct FairseqModelPaths {
  std::string data, path, source_lang, target_lang;
};
// Every checkpoint of `m.path` as a leanseq one in `dir`: a fairseq file imported with `pipeline`
// (none: the text is the model's subwords), a leanseq file as it is or (when the flags name a
// pipeline, which replaces its own) copied with it. Their paths, colon-separated; `first`: the
// first one's languages (and, imported, its architecture).
std::string models_for_decoding(const FairseqModelPaths& m, const FairseqPipeline& pipeline, const std::string& dir,
                                FairseqImportResult* first);

// fairseq's model options among the arguments fairseq-train's own parser did not take, as fairseq
// options (encoder_embed_dim: 64, share_all_embeddings: true, ...) over `arch`'s defaults;
// ConfigError naming an option leanseq does not build.
nlohmann::json fairseq_train_model_args(const std::string& arch, const std::vector<std::string>& extras);

}  // namespace leanseq::interop
