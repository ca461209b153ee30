#include "leanseq/models/a2_blocks.h"

#include "leanseq/core/error.h"
#include "leanseq/models/layer_spec.h"

namespace leanseq::models {

std::string a2_state_name(size_t i) { return "a2_" + std::to_string(i); }

void A2Blocks::visit(ConfigVisitor& v, const std::string& prefix) {
  v.field(prefix + "a2_layers", layers, "A2 double-attention blocks after these layers, e.g. \"1,3\" (decoders: causal)");
  v.field(prefix + "a2_features", features, "A2: gathered feature size m (0: a quarter of the width)");
  v.field(prefix + "a2_descriptors", descriptors, "A2: number of global descriptors n (0: a quarter of the width)");
  v.field(prefix + "a2_norm", norm, "A2: none (X + proj(Z), as the paper) or host (a LayerNorm placed as the host layers')");
}

void A2Blocks::validate(int64_t stack_layers, const std::string& prefix, const char* hosts_without_norm) const {
  parse_layer_list(layers, stack_layers, "model." + prefix + "a2_layers");
  if (features < 0 || descriptors < 0) {
    throw ConfigError("model." + prefix + "a2_features and a2_descriptors must be 0 (a quarter of the width) or positive");
  }
  if (norm != "none" && norm != "host") {
    throw ConfigError("model." + prefix + "a2_norm: expected none or host, got '" + norm + "'");
  }
  if (hosts_without_norm != nullptr && norm != "none") {
    throw ConfigError("model." + prefix + "a2_norm: " + hosts_without_norm + " have no LayerNorm; only none");
  }
}

std::vector<nn::DoubleAttention> A2Blocks::make(torch::nn::Module& owner, int64_t stack_layers, int64_t dim, bool causal,
                                                double dropout, nn::BlockNorm host) const {
  return make(owner, std::vector<int64_t>(static_cast<size_t>(stack_layers), dim), causal, dropout, host);
}

std::vector<nn::DoubleAttention> A2Blocks::make(torch::nn::Module& owner, const std::vector<int64_t>& dims, bool causal,
                                                double dropout, nn::BlockNorm host) const {
  const auto block_norm = norm == "host" ? host : nn::BlockNorm::none;
  std::vector<nn::DoubleAttention> blocks;
  const auto chosen = parse_layer_list(layers, static_cast<int64_t>(dims.size()), "a2_layers");
  for (size_t i = 0; i < dims.size(); ++i) {
    blocks.emplace_back(nullptr);
    if (chosen[i]) {
      const int64_t d = dims[i], m = features > 0 ? features : d / 4, n = descriptors > 0 ? descriptors : d / 4;
      blocks.back() = owner.register_module(a2_state_name(static_cast<size_t>(i)), nn::DoubleAttention(d, m, n, causal, dropout, block_norm));
    }
  }
  return blocks;
}

torch::Tensor step_a2(std::vector<nn::DoubleAttention>& a2, size_t i, const torch::Tensor& x,
                      nn::IncrementalState& state, const torch::Tensor& token_padding) {
  if (!a2[i]) return x;
  return a2[i]->step(x, state.get<nn::DoubleAttentionCache>(a2_state_name(i)), token_padding);
}

}  // namespace leanseq::models
