// CTranslate2 models and Argos Translate packages as leanseq checkpoints. A CTranslate2
// TransformerSpec (what ct2-opennmt-py-converter, ct2-fairseq-converter and the spec API write)
// becomes leanseq's transformer with learned position tables (the file's encodings, or
// CTranslate2's sinusoidal ones computed), separate embeddings and output projection, and the
// vocabulary reordered to fairseq's (<s> <pad> </s> <unk> first). CTranslate2's decoder start
// token takes the decoder input row of </s> (leanseq starts decoding with </s>), and
// add_source_bos/add_source_eos become the checkpoint's source framing. What leanseq does not
// build (relative or rotary positions, multi-query attention, RMS norm, gated FFNs, other
// activations, other model specs) is refused with one line naming it.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "leanseq/checkpoint/file.h"
#include "leanseq/core/config.h"
#include "leanseq/core/io.h"
#include "leanseq/interop/ctranslate2_file.h"

namespace leanseq::interop {

struct Ct2ImportOptions {
  std::string model;      // a CTranslate2 model directory, or an Argos Translate package (.argosmodel or unpacked)
  std::string out;        // the leanseq checkpoint to write (atomically)
  std::string spm;        // SentencePiece model of both sides (default: the package's, or one in the directory)
  std::string tokenizer;  // instead: "none" (pre-tokenized input), or "moses" [with bpe_codes]
  std::string bpe_codes;
  std::string source_lang, target_lang;  // default: the package's metadata, else "src" and "tgt"
};

struct Ct2ImportResult {
  std::string spec, storage, source_lang, target_lang, text_pipeline;
  uint32_t binary_version = 0, spec_revision = 0;
  int64_t parameters = 0, src_vocab = 0, tgt_vocab = 0;
};

// A leanseq model made from a CTranslate2 model: its config values, its weights under leanseq's
// names (float32), its vocabularies and text pipeline, and the storage type of the file's weights.
struct Ct2Conversion {
  ConfigValues values;
  std::map<std::string, torch::Tensor> tensors;
  checkpoint::VocabFiles vocab;
  kernels::ComputeType storage = kernels::ComputeType::float32;
  std::string storage_name;  // as CTranslate2 names it (float32, int8, int16, float16, bfloat16)
};
Ct2Conversion convert_ctranslate2(const Ct2Model& model);

// A model given as a CTranslate2 directory or an Argos Translate package: the directory of its
// CTranslate2 model, the package's SentencePiece model and languages when it is one. A zipped
// package (.argosmodel) is unpacked into `scratch` (its stanza/ folder left out).
struct Ct2Source {
  std::string model_dir, spm, source_lang, target_lang;
};
Ct2Source locate_ctranslate2(const std::string& path, const io::PrivateDirectory* scratch);

// Whether `path` is something locate_ctranslate2 takes: a CTranslate2 directory, an Argos package
// directory (metadata.json and model/), or a file ending in .argosmodel.
bool is_ctranslate2_model(const std::string& path);

// The source and target languages of what locate_ctranslate2 takes: an Argos package's
// metadata.json (from_code, to_code; read from an .argosmodel without unpacking it), else "src"
// and "tgt" (a CTranslate2 directory does not name its languages).
std::pair<std::string, std::string> ctranslate2_languages(const std::string& path);

// The Argos Translate packages in `dir` (package directories and .argosmodel files), sorted by
// name; ConfigError when `dir` is not a directory.
std::vector<std::string> find_argos_packages(const std::string& dir);

// The leanseq checkpoint, in memory, of the model `options.model` names (out unused): its config,
// weights (float32), vocabularies, text pipeline (options' spm, tokenizer and BPE codes, else the
// package's SentencePiece model, else tokens as given), languages and storage type. `result`, when
// given, gets what was read.
checkpoint::Checkpoint ctranslate2_checkpoint(const Ct2ImportOptions& options, Ct2ImportResult* result = nullptr);

// Reads, converts, checks that the weights load into the leanseq model, and writes `out`
// atomically in the file's storage type (int8 weights stay int8 with their scales).
Ct2ImportResult import_ctranslate2(const Ct2ImportOptions& options);

}  // namespace leanseq::interop
