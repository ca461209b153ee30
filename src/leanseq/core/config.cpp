#include "leanseq/core/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/strings.h"

namespace leanseq {

void ConfigValues::set(const std::string& key, const std::string& value, const std::string& from) {
  values[key] = value;
  origin[key] = from;
}

void ConfigValues::merge(const ConfigValues& other) {
  for (const auto& [k, v] : other.values) set(k, v, other.origin.at(k));
}

ConfigValues parse_assignments(const std::vector<std::string>& items, const std::string& from) {
  ConfigValues out;
  for (const auto& item : items) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError(from + ": expected key=value, got '" + item + "'");
    }
    out.set(item.substr(0, eq), item.substr(eq + 1), from);
  }
  return out;
}

namespace {
// A config file's bounds: its bytes, and the nodes and depth its keys flatten to. YAML's aliases
// share nodes, so a small file can name a tree of billions of keys: it is refused at the bound.
constexpr uint64_t kMaxConfigBytes = uint64_t{4} << 20;
constexpr size_t kMaxConfigNodes = 100000;
constexpr int kMaxConfigDepth = 32;

void flatten(const YAML::Node& node, const std::string& prefix, const std::string& origin, ConfigValues& out,
             size_t& visited, int depth = 0) {
  if (++visited > kMaxConfigNodes || depth > kMaxConfigDepth) {
    throw ConfigError(origin + ": more than " + std::to_string(kMaxConfigNodes) + " keys or " +
                      std::to_string(kMaxConfigDepth) + " levels once its aliases are expanded");
  }
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) throw ConfigError(origin + ": a key under '" + prefix + "' is not a plain name");
      std::string key = kv.first.as<std::string>();
      flatten(kv.second, prefix.empty() ? key : prefix + "." + key, origin, out, visited, depth + 1);
    }
  } else if (node.IsScalar()) {
    out.set(prefix, node.Scalar(), origin);
  } else if (node.IsNull()) {
    out.set(prefix, "", origin);
  } else {
    throw ConfigError(origin + ": key '" + prefix + "' must be a scalar or a mapping");
  }
}
}  // namespace

ConfigValues parse_yaml_text(const std::string& text, const std::string& origin) {
  ConfigValues out;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (root.IsNull()) return out;
  if (!root.IsMap()) throw ConfigError(origin + ": expected a YAML mapping at the top level");
  size_t visited = 0;
  flatten(root, "", origin, out, visited);
  return out;
}

ConfigValues load_yaml_file(const std::string& path) {
  std::string text;
  try {
    text = io::read_file(path, "config file", kMaxConfigBytes);
  } catch (const DataError& e) {
    throw ConfigError(e.what());
  }
  return parse_yaml_text(text, path);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(const std::string& key, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(3, key.size() / 3) + 1;
  for (const auto& c : candidates) {
    // The distance is at least the lengths' difference: a far longer key is compared with none.
    if ((key.size() > c.size() ? key.size() - c.size() : c.size() - key.size()) >= best_d) continue;
    size_t d = edit_distance(key, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

namespace {

class KeyCollector : public ConfigVisitor {
 public:
  std::vector<ConfigKey> keys;
  using ConfigVisitor::field;
  void field(const std::string& k, int64_t& v, const char* h, const Range& r) override {
    keys.push_back({k, "int", std::to_string(v), with_range(h, r)});
  }
  void field(const std::string& k, double& v, const char* h, const Range& r) override {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    keys.push_back({k, "float", buf, with_range(h, r)});
  }
  void field(const std::string& k, bool& v, const char* h) override { keys.push_back({k, "bool", v ? "true" : "false", h}); }
  void field(const std::string& k, std::string& v, const char* h) override { keys.push_back({k, "string", v, h}); }

 private:
  // The help with the values the key takes: "peak learning rate (> 0)".
  static std::string with_range(const char* help, const Range& r) {
    const std::string range = r.text();
    return range.empty() ? help : std::string(help) + " (" + range.substr(1) + ")";
  }
};

class Applier : public ConfigVisitor {
 public:
  explicit Applier(const ConfigValues& v) : v_(v) {}
  std::vector<std::string> used;

  using ConfigVisitor::field;
  void field(const std::string& k, int64_t& value, const char*, const Range& range) override {
    if (const auto* s = find(k)) {
      size_t pos = 0;
      long long x = 0;
      try {
        x = std::stoll(*s, &pos);
      } catch (...) {
        pos = 0;
      }
      if (pos == 0 || pos != s->size() || !range.contains(static_cast<double>(x))) {
        bad(k, *s, ("an integer" + range.text()).c_str());
      }
      value = x;
    }
  }
  void field(const std::string& k, double& value, const char*, const Range& range) override {
    if (const auto* s = find(k)) {
      size_t pos = 0;
      double x = 0;
      try {
        x = std::stod(*s, &pos);
      } catch (...) {
        pos = 0;
      }
      // NaN fails both comparisons; infinities are outside any range.
      if (pos == 0 || pos != s->size() || !std::isfinite(x) || !range.contains(x)) {
        bad(k, *s, ("a finite number" + range.text()).c_str());
      }
      value = x;
    }
  }
  void field(const std::string& k, bool& value, const char*) override {
    if (const auto* s = find(k)) {
      std::string t = *s;
      std::transform(t.begin(), t.end(), t.begin(), ::tolower);
      if (t == "true" || t == "1" || t == "yes" || t == "on") {
        value = true;
      } else if (t == "false" || t == "0" || t == "no" || t == "off") {
        value = false;
      } else {
        bad(k, *s, "true or false");
      }
    }
  }
  void field(const std::string& k, std::string& value, const char*) override {
    if (const auto* s = find(k)) value = *s;
  }

 private:
  const std::string* find(const std::string& k) {
    auto it = v_.values.find(k);
    if (it == v_.values.end()) return nullptr;
    used.push_back(k);
    return &it->second;
  }
  [[noreturn]] void bad(const std::string& k, const std::string& s, const char* expected) {
    throw ConfigError(v_.origin.at(k) + ": key '" + k + "': expected " + expected + ", got '" + first_line(s, 200) +
                      "'");
  }
  const ConfigValues& v_;
};

// Collects fields into an ordered tree (visit order) and emits it as nested YAML.
class YamlDumper : public ConfigVisitor {
 public:
  struct Entry {
    std::string key, value;
    std::vector<Entry> children;  // non-empty for a section
  };
  std::vector<Entry> root;

  using ConfigVisitor::field;
  void field(const std::string& k, int64_t& v, const char*, const Range&) override { put(k, std::to_string(v)); }
  void field(const std::string& k, double& v, const char*, const Range&) override {
    std::ostringstream os;
    os.precision(17);
    os << v;
    put(k, os.str());
  }
  void field(const std::string& k, bool& v, const char*) override { put(k, v ? "true" : "false"); }
  void field(const std::string& k, std::string& v, const char*) override { put(k, v); }

  static void emit(YAML::Emitter& out, const std::vector<Entry>& entries) {
    out << YAML::BeginMap;
    for (const auto& e : entries) {
      out << YAML::Key << e.key << YAML::Value;
      if (e.children.empty()) {
        out << YAML::DoubleQuoted << e.value;
      } else {
        emit(out, e.children);
      }
    }
    out << YAML::EndMap;
  }

 private:
  void put(const std::string& key, const std::string& value) {
    std::vector<Entry>* level = &root;
    size_t start = 0;
    for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
      std::string part = key.substr(start, dot - start);
      auto it = std::find_if(level->begin(), level->end(), [&](const Entry& e) { return e.key == part; });
      if (it == level->end()) it = level->insert(level->end(), Entry{part, "", {}});
      level = &it->children;
    }
    level->push_back(Entry{key.substr(start), value, {}});
  }
};

}  // namespace

void apply_config(Configurable& cfg, const ConfigValues& values) {
  Applier applier(values);
  cfg.visit(applier);
  std::vector<std::string> known;
  for (const auto& k : config_keys(cfg)) known.push_back(k.key);
  for (const auto& [k, v] : values.values) {
    if (std::find(applier.used.begin(), applier.used.end(), k) != applier.used.end()) continue;
    std::string msg = values.origin.at(k) + ": unknown key '" + k + "'";
    std::string hint = closest_match(k, known);
    if (!hint.empty()) msg += "; did you mean '" + hint + "'?";
    throw ConfigError(msg);
  }
}

std::string dump_config_yaml(Configurable& cfg) {
  YamlDumper d;
  cfg.visit(d);
  YAML::Emitter out;
  YamlDumper::emit(out, d.root);
  return std::string(out.c_str()) + "\n";
}

std::vector<ConfigKey> config_keys(Configurable& cfg) {
  KeyCollector c;
  cfg.visit(c);
  return c.keys;
}

}  // namespace leanseq
