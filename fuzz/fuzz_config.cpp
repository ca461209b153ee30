// YAML config files as `train -c` and checkpoints read them (core/config.h): flattened to keys
// (aliases expanded under a bound), then applied to fields of each type and range. Anything but a
// ConfigError is a failure, and so is a value set outside its declared range.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "leanseq/core/config.h"
#include "leanseq/core/error.h"

namespace {
struct Fields : leanseq::Configurable {
  int64_t count = 1, any = 0;
  double rate = 0.1, scale = 1;
  bool flag = false;
  std::string name;
  void visit(leanseq::ConfigVisitor& v) override {
    v.field("count", count, "an integer >= 1", leanseq::Range::at_least(1));
    v.field("any", any, "any integer");
    v.field("a.rate", rate, "a probability", leanseq::kProbability);
    v.field("a.b.scale", scale, "above 0", leanseq::Range::above(0));
    v.field("flag", flag, "a boolean");
    v.field("name", name, "a string");
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto values = leanseq::parse_yaml_text(text, "fuzz.yaml");
    Fields f;
    leanseq::apply_config(f, values);
    const bool in_range = f.count >= 1 && std::isfinite(f.rate) && f.rate >= 0 && f.rate <= 1 &&
                          std::isfinite(f.scale) && f.scale > 0;
    if (!in_range) __builtin_trap();
    (void)leanseq::dump_config_yaml(f);
  } catch (const leanseq::ConfigError&) {
  }
  return 0;
}
