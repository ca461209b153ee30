// Contiguous blocks of layers that share attention (SAN), written as "0-1,2-5": 0-based inclusive
// ranges in order, covering every layer once; a lone index is a block of one layer.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "leanseq/core/config.h"
#include "leanseq/nn/double_attention.h"

namespace leanseq::models {

using LayerBlock = std::pair<int64_t, int64_t>;  // first and last layer, inclusive

// For each of `layers` layers, the first layer of its block. An empty spec puts every layer in a
// block of its own. Throws ConfigError naming `key` when the spec is malformed, out of range, not
// in order or does not cover every layer.
std::vector<int64_t> parse_layer_groups(const std::string& spec, int64_t layers, const std::string& key);

// For each of `layers` layers, whether a comma-separated list of indices and inclusive ranges
// ("1,3" or "0-2,5"; empty: none) names it. Throws ConfigError naming `key` for a bad or out-of-range index.
std::vector<bool> parse_layer_list(const std::string& spec, int64_t layers, const std::string& key);

// A2 double-attention blocks inserted into a stack of layers: the config keys
// <prefix>a2_layers ("1,3": after layers 1 and 3; "0-2": after 0, 1 and 2; empty: none), <prefix>a2_features (m) and
// <prefix>a2_descriptors (n), where 0 means a quarter of the stack's width, and <prefix>a2_norm:
// none (the paper's X + proj(Z)) or host (a LayerNorm where the host's layers put theirs).
struct A2Blocks {
  std::string layers;
  int64_t features = 0, descriptors = 0;
  std::string norm = "none";

  void visit(ConfigVisitor& v, const std::string& prefix);
  // Throws ConfigError naming model.<prefix>a2_* for a bad list (for `stack_layers` layers) or size.
  // `hosts_without_norm` names layers that have no LayerNorm (e.g. "ConvS2S's layers"): there
  // a2_norm must be none.
  void validate(int64_t stack_layers, const std::string& prefix, const char* hosts_without_norm = nullptr) const;
  // One block per listed layer, registered on `owner` as a2_<layer>; null elsewhere. With norm
  // host, `host` is the convention of the host's layers (pre-norm or post-norm).
  std::vector<nn::DoubleAttention> make(torch::nn::Module& owner, int64_t stack_layers, int64_t dim, bool causal,
                                        double dropout, nn::BlockNorm host) const;
  // The same where the width after each layer differs: dims[i] after layer i.
  std::vector<nn::DoubleAttention> make(torch::nn::Module& owner, const std::vector<int64_t>& dims, bool causal,
                                        double dropout, nn::BlockNorm host) const;
  bool empty() const { return layers.empty(); }
  // ", A2 after <where> layers 1,3" for a model summary; empty when there are none.
  std::string describe(const std::string& where) const {
    return empty() ? "" : ", A2 after " + where + "layers " + layers;
  }
};

// Decoding, after decoder layer i: x through the A2 block that follows the layer (x itself where
// none does). The blocks' running sums live after the layers' own two slots each
// (EncoderDecoderModel::init_state), at 2 * a2.size() + i.
torch::Tensor step_a2(std::vector<nn::DoubleAttention>& a2, size_t i, const torch::Tensor& x,
                      nn::IncrementalState& state, const torch::Tensor& token_padding);

// The spec of `blocks` ("0-1,2,3-5").
std::string format_layer_groups(const std::vector<LayerBlock>& blocks);

// The LayerNorm convention of a block inserted into layers that are pre-norm or post-norm.
inline nn::BlockNorm host_norm(bool normalize_before) {
  return normalize_before ? nn::BlockNorm::pre : nn::BlockNorm::post;
}

}  // namespace leanseq::models
