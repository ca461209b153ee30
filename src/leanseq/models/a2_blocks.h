// A2 double-attention blocks (nn/double_attention.h) inserted after some layers of an encoder or
// decoder stack: their config keys, construction and decoding step.
#pragma once
#include <string>
#include <vector>

#include "leanseq/core/config.h"
#include "leanseq/nn/double_attention.h"

namespace leanseq::models {

// The config keys <prefix>a2_layers ("1,3": after layers 1 and 3; "0-2": after 0, 1 and 2; empty: none), <prefix>a2_features (m) and
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

// The name of the i-th block's module, and of its cache in an IncrementalState.
std::string a2_state_name(size_t i);

// Decoding, after decoder layer i: x through the A2 block that follows the layer (x itself where
// none does). The block's running sums are the state's cache "a2_<i>" (the block's module name).
torch::Tensor step_a2(std::vector<nn::DoubleAttention>& a2, size_t i, const torch::Tensor& x,
                      nn::IncrementalState& state, const torch::Tensor& token_padding);

// The LayerNorm convention of a block inserted into layers that are pre-norm or post-norm.
inline nn::BlockNorm host_norm(bool normalize_before) {
  return normalize_before ? nn::BlockNorm::pre : nn::BlockNorm::post;
}

}  // namespace leanseq::models
