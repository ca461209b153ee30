// Contiguous blocks of layers that share attention (SAN), written as "0-1,2-5": 0-based inclusive
// ranges in order, covering every layer once; a lone index is a block of one layer.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "leanseq/nn/double_attention.h"

namespace leanseq::models {

using LayerBlock = std::pair<int64_t, int64_t>;  // first and last layer, inclusive

// For each of `layers` layers, the first layer of its block. An empty spec puts every layer in a
// block of its own. Throws ConfigError naming `key` when the spec is malformed, out of range, not
// in order or does not cover every layer.
std::vector<int64_t> parse_layer_groups(const std::string& spec, int64_t layers, const std::string& key);

// For each of `layers` layers, whether a comma-separated list of indices ("1,3"; empty: none)
// names it. Throws ConfigError naming `key` for a bad or out-of-range index.
std::vector<bool> parse_layer_list(const std::string& spec, int64_t layers, const std::string& key);

// The A2 blocks of a stack of `layers` layers of width `dim`: one after each layer that `spec`
// names (parse_layer_list), registered on `owner` as a2_<layer>, null elsewhere; m features and
// n descriptors (0: dim / 4).
std::vector<nn::DoubleAttention> make_double_attention_blocks(torch::nn::Module& owner, const std::string& spec,
                                                              int64_t layers, int64_t dim, int64_t m, int64_t n,
                                                              bool causal, double dropout, const std::string& key);

// The spec of `blocks` ("0-1,2,3-5").
std::string format_layer_groups(const std::vector<LayerBlock>& blocks);

}  // namespace leanseq::models
