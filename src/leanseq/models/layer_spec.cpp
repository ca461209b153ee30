#include "leanseq/models/layer_spec.h"

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

}  // namespace leanseq::models
