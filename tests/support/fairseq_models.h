// Builds leanseq models from the fairseq fixture files (config.model_args + params).
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "leanseq/models/state_dict.h"
#include "leanseq/models/transformer.h"
#include "support/fixtures.h"

namespace leanseq::test {

inline models::TransformerConfig transformer_config_from_fairseq(const nlohmann::json& a) {
  models::TransformerConfig c;
  auto side = [&](const std::string& p, models::TransformerSideConfig& s) {
    s.embed_dim = a[p + "_embed_dim"];
    s.ffn_embed_dim = a[p + "_ffn_embed_dim"];
    s.layers = a[p + "_layers"];
    s.attention_heads = a[p + "_attention_heads"];
    s.normalize_before = a[p + "_normalize_before"];
    s.learned_pos = a[p + "_learned_pos"];
  };
  side("encoder", c.encoder);
  side("decoder", c.decoder);
  c.dropout = a["dropout"];
  c.share_decoder_input_output_embed = a["share_decoder_input_output_embed"];
  c.share_all_embeddings = a["share_all_embeddings"];
  c.max_source_positions = a["max_source_positions"];
  c.max_target_positions = a["max_target_positions"];
  return c;
}

// The fixture's Transformer with its weights loaded, in eval mode.
inline std::shared_ptr<models::Seq2SeqModel> fairseq_transformer(const Fixture& fx, const std::string& name) {
  auto j = nlohmann::json::parse(fx.json_text);
  auto cfg = transformer_config_from_fairseq(j["config"]["model_args"]);
  int64_t V = j["config"]["vocab_size"];
  auto model = std::make_shared<models::TransformerModel>(cfg, V, V);
  models::load_named_tensors(*model, fx.params, true, name);
  model->eval();
  return model;
}

}  // namespace leanseq::test
