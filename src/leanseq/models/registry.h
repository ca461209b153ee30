// Families, presets (fairseq's names) and the one function that registers them all.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "leanseq/core/error.h"
#include "leanseq/models/seq2seq.h"

namespace leanseq::models {

struct VocabInfo {
  int64_t src_size = 0, tgt_size = 0;
  bool joint = false;  // the same dictionary on both sides (needed by share_all_embeddings)
};

struct Family {
  std::string name;
  std::function<std::shared_ptr<ModelConfig>()> make_config;
  std::function<std::shared_ptr<Seq2SeqModel>(const ModelConfig&, const VocabInfo&)> build;
};

struct Preset {
  std::string name, family, description;
  std::function<void(ModelConfig&)> apply;  // a named edit of the family defaults
};

class Registry {
 public:
  void add_family(Family f);
  void add_preset(Preset p);
  const Family& family(const std::string& name) const;
  // Throws ConfigError ("unknown arch 'x'; did you mean 'y'?").
  const Preset& preset(const std::string& name) const;
  const std::vector<Preset>& presets() const { return presets_; }
  // The family's defaults with the preset applied.
  std::shared_ptr<ModelConfig> preset_config(const std::string& arch) const;

 private:
  std::vector<Family> families_;
  std::vector<Preset> presets_;
};

// A family of encoder-decoder models built as Model(cfg, src_vocab, tgt_vocab) from a Config
// with share_all_embeddings (which needs a joint vocabulary).
template <class Config, class Model>
Family encoder_decoder_family(const std::string& name) {
  return {name, [] { return std::make_shared<Config>(); },
          [](const ModelConfig& c, const VocabInfo& v) -> std::shared_ptr<Seq2SeqModel> {
            const auto& cfg = static_cast<const Config&>(c);
            if (cfg.share_all_embeddings && !v.joint) {
              throw ConfigError("model.share_all_embeddings needs a joint vocabulary (prepare without --separate-vocab)");
            }
            return std::make_shared<Model>(cfg, v.src_size, v.tgt_size);
          }};
}

// A family of language models built as Model(cfg, vocab) over the target dictionary.
template <class Config, class Model>
Family language_model_family(const std::string& name) {
  return {name, [] { return std::make_shared<Config>(); },
          [](const ModelConfig& c, const VocabInfo& v) -> std::shared_ptr<Seq2SeqModel> {
            return std::make_shared<Model>(static_cast<const Config&>(c), v.tgt_size);
          }};
}

// add(name, description, edit): registers presets of `family` whose edit takes its own Config.
template <class Config>
std::function<void(const std::string&, const std::string&, std::function<void(Config&)>)> preset_adder(
    Registry& reg, const std::string& family) {
  return [&reg, family](const std::string& name, const std::string& desc, std::function<void(Config&)> edit) {
    reg.add_preset({name, family, desc, [edit](ModelConfig& c) { edit(static_cast<Config&>(c)); }});
  };
}

// Every family registers here, in one place (no static self-registration).
const Registry& registry();

std::shared_ptr<Seq2SeqModel> build_model(const ModelConfig& cfg, const VocabInfo& vocab);

}  // namespace leanseq::models
