#include "leanseq/models/layer_groups.h"

#include <sstream>

#include "leanseq/core/error.h"

namespace leanseq::models {

namespace {
int64_t parse_index(const std::string& s, const std::string& key, const std::string& spec) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || v < 0) {
    throw ConfigError(key + ": '" + spec + "' is not a list of layer ranges such as \"0-1,2-5\" (bad index '" + s +
                      "')");
  }
  return v;
}
}  // namespace

std::vector<bool> parse_layer_list(const std::string& spec, int64_t layers, const std::string& key) {
  std::vector<bool> chosen(static_cast<size_t>(layers), false);
  std::stringstream ss(spec);
  std::string item;
  while (!spec.empty() && std::getline(ss, item, ',')) {
    const auto dash = item.find('-');
    const int64_t first = parse_index(item.substr(0, dash), key, spec);
    const int64_t last = dash == std::string::npos ? first : parse_index(item.substr(dash + 1), key, spec);
    if (last >= layers || last < first) {
      throw ConfigError(key + ": layers " + item + " do not exist or are out of order (" + std::to_string(layers) +
                        " layers)");
    }
    for (int64_t i = first; i <= last; ++i) chosen[static_cast<size_t>(i)] = true;
  }
  return chosen;
}

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
      blocks.back() = owner.register_module("a2_" + std::to_string(i), nn::DoubleAttention(d, m, n, causal, dropout, block_norm));
    }
  }
  return blocks;
}

std::vector<int64_t> parse_layer_groups(const std::string& spec, int64_t layers, const std::string& key) {
  std::vector<int64_t> first(layers);
  if (spec.empty()) {
    for (int64_t i = 0; i < layers; ++i) first[i] = i;
    return first;
  }
  int64_t next = 0;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto dash = item.find('-');
    int64_t a = parse_index(item.substr(0, dash), key, spec);
    int64_t b = dash == std::string::npos ? a : parse_index(item.substr(dash + 1), key, spec);
    if (a != next || b < a || b >= layers) {
      throw ConfigError(key + ": '" + spec + "': blocks must cover layers 0-" + std::to_string(layers - 1) +
                        " in order without gaps; block '" + item + "' should start at layer " + std::to_string(next));
    }
    for (int64_t i = a; i <= b; ++i) first[i] = a;
    next = b + 1;
  }
  if (next != layers) {
    throw ConfigError(key + ": '" + spec + "' covers layers 0-" + std::to_string(next - 1) + " of 0-" +
                      std::to_string(layers - 1));
  }
  return first;
}

std::string format_layer_groups(const std::vector<LayerBlock>& blocks) {
  std::string out;
  for (const auto& [a, b] : blocks) {
    if (!out.empty()) out += ",";
    out += a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b);
  }
  return out;
}

torch::Tensor step_a2(std::vector<nn::DoubleAttention>& a2, size_t i, const torch::Tensor& x,
                      nn::IncrementalState& state, const torch::Tensor& token_padding) {
  if (!a2[i]) return x;
  return a2[i]->step(x, state.get<nn::DoubleAttentionCache>(2 * a2.size() + i), token_padding);
}

}  // namespace leanseq::models
