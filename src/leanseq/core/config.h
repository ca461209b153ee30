// Typed configuration: each config struct lists its fields once in visit(); visitors drive YAML
// load/dump, --set key=value overrides, unknown-key errors and the copy stored in checkpoints.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "leanseq/core/range.h"

namespace leanseq {

class ConfigVisitor {
 public:
  virtual ~ConfigVisitor() = default;
  virtual void field(const std::string& key, int64_t& value, const char* help, const Range& range) = 0;
  virtual void field(const std::string& key, double& value, const char* help, const Range& range) = 0;
  virtual void field(const std::string& key, bool& value, const char* help) = 0;
  virtual void field(const std::string& key, std::string& value, const char* help) = 0;
  void field(const std::string& key, int64_t& value, const char* help) { field(key, value, help, Range{}); }
  void field(const std::string& key, double& value, const char* help) { field(key, value, help, Range{}); }
};

// Forwards every field to `inner` with "<prefix>." in front of its key (for nested sections).
class PrefixedVisitor : public ConfigVisitor {
 public:
  PrefixedVisitor(std::string prefix, ConfigVisitor& inner) : prefix_(std::move(prefix) + "."), inner_(inner) {}
  using ConfigVisitor::field;
  void field(const std::string& k, int64_t& v, const char* h, const Range& r) override { inner_.field(prefix_ + k, v, h, r); }
  void field(const std::string& k, double& v, const char* h, const Range& r) override { inner_.field(prefix_ + k, v, h, r); }
  void field(const std::string& k, bool& v, const char* h) override { inner_.field(prefix_ + k, v, h); }
  void field(const std::string& k, std::string& v, const char* h) override { inner_.field(prefix_ + k, v, h); }

 private:
  std::string prefix_;
  ConfigVisitor& inner_;
};

// Anything with fields that a ConfigVisitor can walk.
class Configurable {
 public:
  virtual ~Configurable() = default;
  virtual void visit(ConfigVisitor& v) = 0;
};

// Dotted key -> textual value, with where each value came from (for error messages).
struct ConfigValues {
  std::map<std::string, std::string> values;
  std::map<std::string, std::string> origin;
  void set(const std::string& key, const std::string& value, const std::string& from);
  void merge(const ConfigValues& other);  // other wins
};

// Parses "key=value" (as given to --set).
ConfigValues parse_assignments(const std::vector<std::string>& items, const std::string& from);

// Flattens a YAML mapping into dotted keys (nested maps become "a.b.c"). Throws ConfigError naming
// the file when it is missing or malformed.
ConfigValues load_yaml_file(const std::string& path);
ConfigValues parse_yaml_text(const std::string& text, const std::string& origin);

// Sets every value onto `cfg`. Keys that `cfg` does not have raise ConfigError ("unknown key 'x';
// did you mean 'y'?"); values that do not parse as the field's type raise ConfigError too.
void apply_config(Configurable& cfg, const ConfigValues& values);

// Dumps every field as nested YAML, in visit order.
std::string dump_config_yaml(Configurable& cfg);

// A key `cfg` accepts: its type (int, float, bool or string), its current value as text (a
// fresh config's: the default) and its help.
struct ConfigKey {
  std::string key, type, value, help;
};
// The keys of `cfg`, in visit order.
std::vector<ConfigKey> config_keys(Configurable& cfg);

// Edit distance, for "did you mean" hints.
size_t edit_distance(const std::string& a, const std::string& b);
// The closest candidate to `key`, or "" when none is close.
std::string closest_match(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace leanseq
