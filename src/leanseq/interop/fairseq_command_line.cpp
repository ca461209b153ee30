#include "leanseq/interop/fairseq_command_line.h"

#include <algorithm>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/model.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/strings.h"
#include "leanseq/interop/torch_file.h"
#include "leanseq/text/bpe.h"
#include "leanseq/text/moses_bpe.h"

namespace leanseq::interop {

FairseqPipeline fairseq_pipeline(const FairseqPipelineFlags& f) {
  if (!f.spm.empty() && f.bpe != "sentencepiece") throw ConfigError("--sentencepiece-model goes with --bpe sentencepiece");
  const bool bpe = f.bpe == "subword_nmt" || f.bpe == "fastbpe";
  if (!f.bpe_codes.empty() && !bpe) throw ConfigError("--bpe-codes goes with --bpe subword_nmt or fastbpe");
  if ((f.moses_no_dash_splits || f.moses_no_escape) && f.tokenizer != "moses") {
    throw ConfigError("--moses-no-dash-splits and --moses-no-escape go with --tokenizer moses");
  }
  if (f.bpe == "sentencepiece") {
    if (f.spm.empty()) throw ConfigError("--bpe sentencepiece needs --sentencepiece-model");
    if (!f.tokenizer.empty()) throw ConfigError("--tokenizer moses goes with --bpe subword_nmt or fastbpe, not sentencepiece");
    return {f.spm, "", "", true};
  }
  if (bpe && f.bpe_codes.empty()) throw ConfigError("--bpe " + f.bpe + " needs --bpe-codes");
  // Each reads only its own codes format: subword-nmt and fastBPE refuse the other's file.
  if (bpe && text::Bpe::from_file(f.bpe_codes).fastbpe() != (f.bpe == "fastbpe")) {
    throw ConfigError("--bpe " + f.bpe + ": " + f.bpe_codes + " holds " +
                      (f.bpe == "fastbpe" ? "subword-nmt's codes, not fastBPE's ('a b count' lines)"
                                          : "fastBPE's codes ('a b count' lines): give --bpe fastbpe"));
  }
  text::TokenizerSpec t;
  t.moses = f.tokenizer == "moses";
  t.dash_splits = !f.moses_no_dash_splits;
  t.escape = !f.moses_no_escape;
  return {"", t.text(), f.bpe_codes, bpe || t.moses};
}

namespace {
// A leanseq checkpoint (one fairseq-train wrote, read from `path`) copied to `out` with the text
// pipeline of `p`.
void copy_with_pipeline(const checkpoint::Checkpoint& ck, const std::string& path, const FairseqPipeline& p,
                        const std::string& out) {
  const auto loaded = checkpoint::load_model(ck, path);
  auto vocab = ck.vocab;
  vocab.src_spm = vocab.tgt_spm = p.spm.empty() ? "" : io::read_file(p.spm);
  vocab.tokenizer = p.tokenizer;
  vocab.bpe_codes = p.bpe_codes.empty() ? "" : io::read_file(p.bpe_codes);
  checkpoint::save_checkpoint(out, ck.config_yaml, vocab, ck.progress, *loaded.model, nullptr, ck.storage);
}

}  // namespace

std::string models_for_decoding(const FairseqModelPaths& m, const FairseqPipeline& pipeline, const std::string& dir,
                                FairseqImportResult* first) {
  FairseqImportOptions import;
  import.spm = pipeline.spm;
  import.tokenizer = pipeline.tokenizer;
  import.bpe_codes = pipeline.bpe_codes;
  import.data_dir = m.data;
  import.source_lang = m.source_lang;
  import.target_lang = m.target_lang;
  std::string imported;
  const auto paths = colon_separated_paths(m.path, "--path");
  for (size_t i = 0; i < paths.size(); ++i) {
    FairseqImportResult r;
    std::string path = dir + "/" + std::to_string(i) + ".pt";
    if (is_torch_pickle_file(paths[i])) {
      import.checkpoint = paths[i];
      import.out = path;
      r = interop::import_fairseq(import);
    } else {
      const auto ck = checkpoint::read_checkpoint(paths[i]);
      r.source_lang = ck.vocab.src_lang;
      r.target_lang = ck.vocab.tgt_lang;
      if ((!m.source_lang.empty() && m.source_lang != r.source_lang) ||
          (!m.target_lang.empty() && m.target_lang != r.target_lang)) {
        throw ConfigError(paths[i] + " translates " + r.source_lang + "-" + r.target_lang + ", not " +
                          (m.source_lang.empty() ? r.source_lang : m.source_lang) + "-" +
                          (m.target_lang.empty() ? r.target_lang : m.target_lang));
      }
      if (pipeline.given) {
        copy_with_pipeline(ck, paths[i], pipeline, path);
      } else {
        path = paths[i];
      }
    }
    if (i == 0 && first) *first = r;
    imported += (imported.empty() ? "" : ":") + path;
  }
  return imported;
}

nlohmann::json fairseq_train_model_args(const std::string& arch, const std::vector<std::string>& extras) {
  nlohmann::json args = fairseq_arch_defaults(arch);
  args["arch"] = arch;
  const auto options = fairseq_model_options(arch);
  for (size_t i = 0; i < extras.size(); ++i) {
    const std::string& word = extras[i];
    if (word.rfind("--", 0) != 0) {
      throw ConfigError("fairseq-train: unexpected argument '" + word + "' (the data directory comes first)");
    }
    const auto eq = word.find('=');
    std::string name = word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::replace(name.begin(), name.end(), '-', '_');
    const auto it = std::find_if(options.begin(), options.end(), [&](const auto& o) { return o.first == name; });
    if (it == options.end()) {
      throw ConfigError("fairseq-train: fairseq's " + word.substr(0, eq) + " is not supported by leanseq (docs/fairseq.md)");
    }
    if (it->second) {  // a flag, or (fairseq's eval_bool options: --encoder-glu True) a boolean value
      const bool valued = eq == std::string::npos && i + 1 < extras.size() &&
                          (extras[i + 1] == "True" || extras[i + 1] == "False");
      const std::string v = eq != std::string::npos ? word.substr(eq + 1) : valued ? extras[++i] : "True";
      if (v != "True" && v != "False") throw ConfigError("fairseq-train: " + word + ": expected True or False");
      args[name] = v == "True";
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = word.substr(eq + 1);
    } else if (i + 1 < extras.size() && extras[i + 1].rfind("--", 0) != 0) {
      value = extras[++i];
    } else {
      throw ConfigError("fairseq-train: " + word + " needs a value (give the data directory before the options)");
    }
    // Numbers and lists ([3,7,15]) as fairseq's parser types them; other values as text.
    const auto parsed = nlohmann::json::parse(value, nullptr, false);
    args[name] = !parsed.is_discarded() && (parsed.is_number() || parsed.is_array() || parsed.is_boolean()) ? parsed
                                                                                                             : nlohmann::json(value);
  }
  return args;
}

}  // namespace leanseq::interop
