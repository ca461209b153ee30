// Builds leanseq models from the fairseq fixture files (config.model_args + params).
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "leanseq/models/fconv.h"
#include "leanseq/models/lightconv.h"
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

inline models::LightConvConfig lightconv_config_from_fairseq(const nlohmann::json& a) {
  models::LightConvConfig c;
  auto side = [&](const std::string& p, models::LightConvSideConfig& s) {
    s.embed_dim = a[p + "_embed_dim"];
    s.conv_dim = a[p + "_conv_dim"];
    s.ffn_embed_dim = a[p + "_ffn_embed_dim"];
    s.layers = a[p + "_layers"];
    s.attention_heads = a[p + "_attention_heads"];
    s.normalize_before = a[p + "_normalize_before"];
    s.learned_pos = a[p + "_learned_pos"];
    s.glu = a[p + "_glu"];
    s.conv_type = a[p + "_conv_type"];
    s.kernel_size_list.clear();
    for (const auto& k : a[p + "_kernel_size_list"]) s.kernel_size_list += std::to_string(k.get<int64_t>()) + ",";
  };
  side("encoder", c.encoder);
  side("decoder", c.decoder);
  c.dropout = a["dropout"];
  c.attention_dropout = a["attention_dropout"];
  c.relu_dropout = a["relu_dropout"];
  c.input_dropout = a["input_dropout"];
  c.weight_dropout = a["weight_dropout"];
  c.weight_softmax = a["weight_softmax"];
  c.share_decoder_input_output_embed = a["share_decoder_input_output_embed"];
  c.share_all_embeddings = a["share_all_embeddings"];
  c.max_source_positions = a["max_source_positions"];
  c.max_target_positions = a["max_target_positions"];
  return c;
}

inline models::FConvConfig fconv_config_from_fairseq(const nlohmann::json& a) {
  models::FConvConfig c;
  c.encoder_embed_dim = a["encoder_embed_dim"];
  c.encoder_layers = a["encoder_layers"];
  c.decoder_embed_dim = a["decoder_embed_dim"];
  c.decoder_layers = a["decoder_layers"];
  c.decoder_out_embed_dim = a["decoder_out_embed_dim"];
  c.decoder_attention = a["decoder_attention"];
  c.dropout = a["dropout"];
  c.share_input_output_embed = a["share_input_output_embed"];
  c.max_source_positions = a["max_source_positions"];
  c.max_target_positions = a["max_target_positions"];
  return c;
}

// fairseq's DynamicConv_scripatable registers `conv_bias` even when it does not use it (the
// lightconv model never sets conv_bias); those entries are dropped before loading.
inline std::map<std::string, torch::Tensor> without_unused_conv_bias(std::map<std::string, torch::Tensor> params) {
  for (auto it = params.begin(); it != params.end();) {
    const std::string& k = it->first;
    const std::string suffix = "conv.conv_bias";
    if (k.size() >= suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0) {
      it = params.erase(it);
    } else {
      ++it;
    }
  }
  return params;
}

// The fixture's whole model (transformer, lightconv or fconv) with its weights loaded, in eval mode.
inline std::shared_ptr<models::Seq2SeqModel> fairseq_model(const Fixture& fx, const std::string& name) {
  auto j = nlohmann::json::parse(fx.json_text);
  const auto& args = j["config"]["model_args"];
  int64_t V = j["config"]["vocab_size"];
  std::shared_ptr<models::Seq2SeqModel> model;
  if (j["config"]["arch"] == "lightconv") {
    model = std::make_shared<models::LightConvModel>(lightconv_config_from_fairseq(args), V, V);
  } else if (j["config"]["arch"] == "fconv") {
    model = std::make_shared<models::FConvModel>(fconv_config_from_fairseq(args), V, V);
  } else {
    model = std::make_shared<models::TransformerModel>(transformer_config_from_fairseq(args), V, V);
  }
  models::load_named_tensors(*model, without_unused_conv_bias(fx.params), true, name);
  model->eval();
  return model;
}

}  // namespace leanseq::test
