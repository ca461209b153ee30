// The defaults fairseq 0.12's named architectures (register_model_architecture) set beyond their
// family's base_architecture: what `--arch transformer_iwslt_de_en` means when fairseq-train is not
// given the dimensions.
#include "leanseq/core/error.h"
#include "leanseq/interop/fairseq.h"

namespace leanseq::interop {

namespace {
using json = nlohmann::json;

json merged(json base, const json& over) {
  for (auto it = over.begin(); it != over.end(); ++it) base[it.key()] = it.value();
  return base;
}

const std::map<std::string, json>& named_archs() {
  static const std::map<std::string, json> archs = [] {
    const json big = {{"encoder_embed_dim", 1024}, {"encoder_ffn_embed_dim", 4096}, {"encoder_attention_heads", 16},
                      {"encoder_normalize_before", false}, {"decoder_embed_dim", 1024},
                      {"decoder_ffn_embed_dim", 4096}, {"decoder_attention_heads", 16}, {"dropout", 0.3}};
    const json lightconv_big = merged(big, {{"attention_dropout", 0.1}});
    std::map<std::string, json> m = {
        {"transformer", json::object()},
        {"transformer_wmt_en_de", json::object()},
        {"transformer_iwslt_de_en",
         {{"encoder_embed_dim", 512}, {"encoder_ffn_embed_dim", 1024}, {"encoder_attention_heads", 4},
          {"encoder_layers", 6}, {"decoder_embed_dim", 512}, {"decoder_ffn_embed_dim", 1024},
          {"decoder_attention_heads", 4}, {"decoder_layers", 6}}},
        {"transformer_vaswani_wmt_en_de_big", big},
        {"transformer_vaswani_wmt_en_fr_big", merged(big, {{"dropout", 0.1}})},
        {"transformer_wmt_en_de_big", merged(big, {{"attention_dropout", 0.1}})},
        {"transformer_wmt_en_de_big_t2t",
         merged(big, {{"encoder_normalize_before", true}, {"decoder_normalize_before", true},
                      {"attention_dropout", 0.1}, {"activation_dropout", 0.1}})},
        {"lightconv", json::object()},
        {"lightconv_wmt_en_de", json::object()},
        {"lightconv_iwslt_de_en",
         {{"encoder_embed_dim", 512}, {"encoder_ffn_embed_dim", 1024}, {"encoder_attention_heads", 4},
          {"encoder_layers", 7}, {"decoder_embed_dim", 512}, {"decoder_ffn_embed_dim", 1024},
          {"decoder_attention_heads", 4}, {"decoder_layers", 6}, {"attention_dropout", 0.1},
          {"weight_dropout", 0.1}, {"encoder_glu", false}, {"decoder_glu", false}, {"input_dropout", 0.0}}},
        {"lightconv_wmt_en_de_big", lightconv_big},
        {"lightconv_wmt_en_fr_big", merged(lightconv_big, {{"dropout", 0.1}})},
        {"lightconv_wmt_zh_en_big",
         merged(lightconv_big, {{"dropout", 0.2}, {"attention_dropout", 0.2}, {"weight_dropout", 0.2}})},
        // fairseq 0.12's dataclass transformer_lm keeps 512 for decoder_input_dim and
        // decoder_output_dim whatever --decoder-embed-dim says, and post-norm (its
        // base_lm_architecture's pre-norm does not reach the built model).
        {"transformer_lm",
         {{"decoder_input_dim", 512}, {"decoder_output_dim", 512}, {"decoder_normalize_before", false}}},
        {"lightconv_lm", json::object()},
        {"lightconv_lm_gbw",
         {{"decoder_ffn_embed_dim", 4096}, {"decoder_attention_heads", 16}, {"attention_dropout", 0.1}}},
        {"fconv", json::object()},
        {"fconv_iwslt_de_en",
         {{"encoder_embed_dim", 256}, {"encoder_layers", "[(256, 3)] * 4"}, {"decoder_embed_dim", 256},
          {"decoder_layers", "[(256, 3)] * 3"}, {"decoder_out_embed_dim", 256}}},
        {"fconv_wmt_en_ro", {{"decoder_out_embed_dim", 512}}},
        {"fconv_wmt_en_de",
         {{"encoder_embed_dim", 768}, {"encoder_layers", "[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2"},
          {"decoder_embed_dim", 768}, {"decoder_layers", "[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2"},
          {"decoder_out_embed_dim", 512}}},
        {"fconv_wmt_en_fr",
         {{"encoder_embed_dim", 768},
          {"encoder_layers", "[(512, 3)] * 6 + [(768, 3)] * 4 + [(1024, 3)] * 3 + [(2048, 1)] * 1 + [(4096, 1)] * 1"},
          {"decoder_embed_dim", 768},
          {"decoder_layers", "[(512, 3)] * 6 + [(768, 3)] * 4 + [(1024, 3)] * 3 + [(2048, 1)] * 1 + [(4096, 1)] * 1"},
          {"decoder_out_embed_dim", 512}}},
    };
    return m;
  }();
  return archs;
}
}  // namespace

nlohmann::json fairseq_arch_defaults(const std::string& arch) {
  const auto it = named_archs().find(arch);
  if (it != named_archs().end()) return it->second;
  std::string known;
  for (const auto& [name, defaults] : named_archs()) known += (known.empty() ? "" : ", ") + name;
  throw ConfigError("fairseq arch '" + arch + "' is not one leanseq trains (" + known + ")");
}

}  // namespace leanseq::interop
