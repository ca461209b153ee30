// Lists of layers in config values. SAN's attention-sharing blocks are contiguous ranges written
// as "0-1,2-5": 0-based inclusive ranges in order, covering every layer once (a lone index is a
// block of one layer); other keys (A2 blocks, see a2_blocks.h) name some layers: "1,3", "0-2,5".
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace leanseq::models {

using LayerBlock = std::pair<int64_t, int64_t>;  // first and last layer, inclusive

// For each of `layers` layers, the first layer of its block. An empty spec puts every layer in a
// block of its own. Throws ConfigError naming `key` when the spec is malformed, out of range, not
// in order or does not cover every layer.
std::vector<int64_t> parse_layer_groups(const std::string& spec, int64_t layers, const std::string& key);

// For each of `layers` layers, whether a comma-separated list of indices and inclusive ranges
// ("1,3" or "0-2,5"; empty: none) names it. Throws ConfigError naming `key` for a bad or out-of-range index.
std::vector<bool> parse_layer_list(const std::string& spec, int64_t layers, const std::string& key);

// The spec of `blocks` ("0-1,2,3-5").
std::string format_layer_groups(const std::vector<LayerBlock>& blocks);

}  // namespace leanseq::models
