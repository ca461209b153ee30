#include "leanseq/models/registry.h"

#include "leanseq/core/error.h"
#include "leanseq/models/classifier.h"
#include "leanseq/models/fconv.h"
#include "leanseq/models/lightconv.h"
#include "leanseq/models/pervasive.h"
#include "leanseq/models/transformer.h"

namespace leanseq::models {

void Registry::add_family(Family f) { families_.push_back(std::move(f)); }
void Registry::add_preset(Preset p) { presets_.push_back(std::move(p)); }

const Family& Registry::family(const std::string& name) const {
  for (const auto& f : families_) {
    if (f.name == name) return f;
  }
  throw ConfigError("unknown model family '" + name + "'");
}

const Preset& Registry::preset(const std::string& name) const {
  std::vector<std::string> names;
  for (const auto& p : presets_) {
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  std::string msg = "unknown arch '" + name + "'";
  std::string hint = closest_match(name, names);
  if (!hint.empty()) msg += "; did you mean '" + hint + "'?";
  throw ConfigError(msg + " (leanseq list-archs shows them all)");
}

std::shared_ptr<ModelConfig> Registry::preset_config(const std::string& arch) const {
  const auto& p = preset(arch);
  auto cfg = family(p.family).make_config();
  p.apply(*cfg);
  return cfg;
}

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    register_transformer(reg);
    register_lightconv(reg);
    register_fconv(reg);
    register_pervasive(reg);
    register_classifiers(reg);
    return reg;
  }();
  return r;
}

std::shared_ptr<Seq2SeqModel> build_model(const ModelConfig& cfg, const VocabInfo& vocab) {
  cfg.validate();
  return registry().family(cfg.family()).build(cfg, vocab);
}

}  // namespace leanseq::models
