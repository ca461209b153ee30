#include "leanseq/interop/fairseq_families.h"

namespace leanseq::interop {

namespace {

bool is_false(const json& v, const json&) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); }
bool is_none(const json& v, const json&) {
  return v.is_null() || (v.is_string() && (v.get<std::string>().empty() || v.get<std::string>() == "None"));
}
bool is_zero(const json& v, const json&) { return v.is_null() || (v.is_number() && v.get<double>() == 0); }
std::function<bool(const json&, const json&)> equals_option(const char* other) {
  return [other](const json& v, const json& args) {
    return v.is_null() || !args.contains(other) || args[other].is_null() || v == args[other];
  };
}

const Family& transformer_family() {
  static const Family f{
      "transformer",
      {{"encoder_embed_dim", "model.encoder.embed_dim", 512},
       {"encoder_ffn_embed_dim", "model.encoder.ffn_embed_dim", 2048},
       {"encoder_layers", "model.encoder.layers", 6},
       {"encoder_attention_heads", "model.encoder.attention_heads", 8},
       {"encoder_normalize_before", "model.encoder.normalize_before", false},
       {"encoder_learned_pos", "model.encoder.learned_pos", false},
       {"decoder_embed_dim", "model.decoder.embed_dim", "encoder_embed_dim"},
       {"decoder_ffn_embed_dim", "model.decoder.ffn_embed_dim", "encoder_ffn_embed_dim"},
       {"decoder_layers", "model.decoder.layers", 6},
       {"decoder_attention_heads", "model.decoder.attention_heads", 8},
       {"decoder_normalize_before", "model.decoder.normalize_before", false},
       {"decoder_learned_pos", "model.decoder.learned_pos", false},
       {"activation_fn", "model.activation_fn", "relu"},
       {"dropout", "model.dropout", 0.1},
       {"attention_dropout", "model.attention_dropout", 0.0},
       {"activation_dropout", "model.activation_dropout", 0.0},
       {"share_decoder_input_output_embed", "model.share_decoder_input_output_embed", false},
       {"share_all_embeddings", "model.share_all_embeddings", false},
       {"no_scale_embedding", "model.no_scale_embedding", false},
       {"layernorm_embedding", "model.layernorm_embedding", false},
       {"decoder_output_dim", "model.decoder.output_dim", "decoder_embed_dim"},
       {"max_source_positions", "model.max_source_positions", 1024},
       {"max_target_positions", "model.max_target_positions", 1024}},
      {{"activation_fn", [](const json& v, const json&) { return v.is_null() || v == "relu" || v == "gelu"; }},
       {"adaptive_softmax_cutoff", is_none},
       {"adaptive_input", is_false},
       {"tie_adaptive_weights", is_false},
       {"no_token_positional_embeddings", is_false},
       {"cross_self_attention", is_false},
       {"no_cross_attention", is_false},
       {"no_decoder_final_norm", is_false},
       {"encoder_layers_to_keep", is_none},
       {"decoder_layers_to_keep", is_none},
       // fairseq 0.12 sizes the decoder's embeddings by decoder_embed_dim whatever this says.
       {"decoder_input_dim", [](const json&, const json&) { return true; }},
       {"quant_noise_pq", is_zero, true},  // quantization noise: off at inference
       {"quant_noise_scalar", is_zero, true},
       {"merge_src_tgt_embed", is_false},
       {"char_inputs", is_false},
       {"scale_attn", is_false},
       {"scale_fc", is_false},
       {"scale_heads", is_false},
       {"scale_resids", is_false},
       {"alignment_layer", is_none},
       {"full_context_alignment", is_false}}};
  return f;
}

const Family& lightconv_family() {
  static const Family f{
      "lightconv",
      {{"encoder_embed_dim", "model.encoder.embed_dim", 512},
       {"encoder_conv_dim", "model.encoder.conv_dim", "encoder_embed_dim"},
       {"encoder_ffn_embed_dim", "model.encoder.ffn_embed_dim", 2048},
       {"encoder_layers", "model.encoder.layers", 7},
       {"encoder_attention_heads", "model.encoder.attention_heads", 8},
       {"encoder_normalize_before", "model.encoder.normalize_before", false},
       {"encoder_learned_pos", "model.encoder.learned_pos", false},
       {"encoder_glu", "model.encoder.glu", true},
       {"encoder_conv_type", "model.encoder.conv_type", "dynamic"},
       {"encoder_kernel_size_list", "model.encoder.kernel_size_list", json::array({3, 7, 15, 31, 31, 31, 31})},
       {"decoder_embed_dim", "model.decoder.embed_dim", "encoder_embed_dim"},
       {"decoder_conv_dim", "model.decoder.conv_dim", "decoder_embed_dim"},
       {"decoder_ffn_embed_dim", "model.decoder.ffn_embed_dim", "encoder_ffn_embed_dim"},
       {"decoder_layers", "model.decoder.layers", 6},
       {"decoder_attention_heads", "model.decoder.attention_heads", "encoder_attention_heads"},
       {"decoder_normalize_before", "model.decoder.normalize_before", false},
       {"decoder_learned_pos", "model.decoder.learned_pos", false},
       {"decoder_glu", "model.decoder.glu", true},
       {"decoder_conv_type", "model.decoder.conv_type", "encoder_conv_type"},
       {"decoder_kernel_size_list", "model.decoder.kernel_size_list", json::array({3, 7, 15, 31, 31, 31})},
       {"weight_softmax", "model.weight_softmax", true},
       {"dropout", "model.dropout", 0.1},
       {"attention_dropout", "model.attention_dropout", 0.0},
       {"relu_dropout", "model.relu_dropout", 0.0},
       {"input_dropout", "model.input_dropout", 0.1},
       {"weight_dropout", "model.weight_dropout", 0.0},
       {"share_decoder_input_output_embed", "model.share_decoder_input_output_embed", false},
       {"share_all_embeddings", "model.share_all_embeddings", false},
       {"max_source_positions", "model.max_source_positions", 1024},
       {"max_target_positions", "model.max_target_positions", 1024}},
      {{"adaptive_softmax_cutoff", is_none},
       {"no_token_positional_embeddings", is_false},
       {"decoder_output_dim", equals_option("decoder_embed_dim")},
       {"decoder_input_dim", equals_option("decoder_embed_dim")}}};
  return f;
}

const Family& fconv_family() {
  static const Family f{"fconv",
                        {{"encoder_embed_dim", "model.encoder.embed_dim", 512},
                         {"encoder_layers", "model.encoder.layers", "[(512, 3)] * 20"},
                         {"decoder_embed_dim", "model.decoder.embed_dim", 512},
                         {"decoder_layers", "model.decoder.layers", "[(512, 3)] * 20"},
                         {"decoder_out_embed_dim", "model.decoder.out_embed_dim", 256},
                         {"decoder_attention", "model.decoder.attention", "True"},
                         {"dropout", "model.dropout", 0.1},
                         {"share_input_output_embed", "model.share_input_output_embed", false},
                         {"max_source_positions", "model.max_source_positions", 1024},
                         {"max_target_positions", "model.max_target_positions", 1024}},
                        {}};
  return f;
}

// Language models: what fairseq's base_lm_architecture leaves to a checkpoint (decoder options only).
// fairseq 0.12's dataclass transformer_lm keeps its 512 defaults for decoder_input_dim and
// decoder_output_dim whatever --decoder-embed-dim says, and its saved decoder_normalize_before, not
// base_lm_architecture's, is what the network was built with.
const std::vector<Refusal>& lm_refusals() {
  static const std::vector<Refusal> r{{"adaptive_softmax_cutoff", is_none},
                                      {"adaptive_input", is_false},
                                      {"tie_adaptive_weights", is_false},
                                      {"character_embeddings", is_false},
                                      {"no_token_positional_embeddings", is_false},
                                      {"add_bos_token", is_false},
                                      {"decoder_layers_to_keep", is_none},
                                      {"quant_noise_pq", is_zero, true},
                                      {"quant_noise_scalar", is_zero, true}};
  return r;
}

// The decoder options both language models map alike, then `extra`.
std::vector<Field> lm_fields(std::vector<Field> extra) {
  std::vector<Field> f{{"decoder_embed_dim", "model.decoder.embed_dim", 512},
                       {"decoder_ffn_embed_dim", "model.decoder.ffn_embed_dim", 2048},
                       {"decoder_layers", "model.decoder.layers", 6},
                       {"decoder_attention_heads", "model.decoder.attention_heads", 8},
                       {"decoder_normalize_before", "model.decoder.normalize_before", true},
                       {"decoder_learned_pos", "model.decoder.learned_pos", false},
                       {"dropout", "model.dropout", 0.1},
                       {"share_decoder_input_output_embed", "model.share_decoder_input_output_embed", false},
                       {"max_target_positions", "model.max_target_positions", "tokens_per_sample"},
                       {"tokens_per_sample", "", 1024}};  // "": read by max_target_positions only
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

const Family& transformer_lm_family() {
  static const Family f = [] {
    Family t{"transformer_lm",
             lm_fields({{"decoder_input_dim", "model.decoder.input_dim", "decoder_embed_dim"},
                        {"decoder_output_dim", "model.decoder.output_dim", "decoder_embed_dim"},
                        {"activation_fn", "model.activation_fn", "relu"},
                        {"attention_dropout", "model.attention_dropout", 0.0},
                        {"activation_dropout", "model.activation_dropout", 0.0},
                        {"no_scale_embedding", "model.no_scale_embedding", false},
                        {"layernorm_embedding", "model.layernorm_embedding", false}}),
             lm_refusals()};
    for (const char* k : {"no_decoder_final_norm", "cross_self_attention", "scale_attn", "scale_fc", "scale_heads",
                          "scale_resids", "char_inputs"}) {
      t.refusals.push_back({k, is_false});
    }
    t.refusals.push_back({"activation_fn", [](const json& v, const json&) { return v.is_null() || v == "relu" || v == "gelu"; }});
    t.refusals.push_back({"base_layers", is_zero});
    t.refusals.push_back({"decoder_xformers_att_config", is_none});
    return t;
  }();
  return f;
}

const Family& lightconv_lm_family() {
  static const Family f = [] {
    Family l{"lightconv_lm",
             lm_fields({{"decoder_conv_dim", "model.decoder.conv_dim", "decoder_embed_dim"},
                        {"decoder_glu", "model.decoder.glu", true},
                        {"decoder_conv_type", "model.decoder.conv_type", "dynamic"},
                        {"decoder_kernel_size_list", "model.decoder.kernel_size_list", json::array({3, 7, 15, 31, 31, 31})},
                        {"weight_softmax", "model.weight_softmax", true},
                        {"attention_dropout", "", 0.0},  // no encoder attention: weight_dropout's default only
                        {"relu_dropout", "model.relu_dropout", 0.0},
                        {"input_dropout", "model.input_dropout", 0.1},
                        {"weight_dropout", "model.weight_dropout", "attention_dropout"}}),
             lm_refusals()};
    l.refusals.push_back({"decoder_output_dim", equals_option("decoder_embed_dim")});
    l.refusals.push_back({"decoder_input_dim", equals_option("decoder_embed_dim")});
    return l;
  }();
  return f;
}

}  // namespace

bool is_alignment_arch(const std::string& arch) {
  return arch.rfind("transformer", 0) == 0 && arch.size() > 6 && arch.compare(arch.size() - 6, 6, "_align") == 0;
}

const Family& fairseq_transformer_family() { return transformer_family(); }

const Family* fairseq_family(const std::string& arch) {
  auto starts = [&](const char* p) { return arch.rfind(p, 0) == 0; };
  if (starts("transformer_lm")) return &transformer_lm_family();
  if (is_alignment_arch(arch) || arch.find("xlm") != std::string::npos) return nullptr;
  if (arch == "transformer" || starts("transformer_")) return &transformer_family();
  if (starts("lightconv_lm")) return &lightconv_lm_family();
  if (arch == "lightconv" || starts("lightconv_")) return &lightconv_family();
  if (starts("fconv_self_att") || starts("fconv_lm")) return nullptr;
  if (arch == "fconv" || starts("fconv_")) return &fconv_family();
  return nullptr;
}

}  // namespace leanseq::interop
