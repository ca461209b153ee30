// The run config: a preset, then a file's values, then overrides; unknown keys named with a
// suggestion.
#include <gtest/gtest.h>

#include "leanseq/checkpoint/run_config.h"
#include "leanseq/core/error.h"

using namespace leanseq;

TEST(RunConfig, PresetThenOverridesAndUnknownKeys) {
  ConfigValues v = parse_yaml_text("arch: transformer_iwslt_de_en\nmodel:\n  dropout: 0.3\n", "cfg.yaml");
  auto cfg = checkpoint::resolve_run_config(v);
  auto yaml = checkpoint::dump_run_config(cfg);
  EXPECT_NE(yaml.find("ffn_embed_dim: \"1024\""), std::string::npos);
  EXPECT_NE(yaml.find("dropout: \"0.29999999999999999\""), std::string::npos);
  try {
    checkpoint::resolve_run_config(parse_yaml_text("model:\n  encoder:\n    layer: 3\n", "cfg.yaml"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "cfg.yaml: unknown key 'model.encoder.layer'; did you mean 'model.encoder.layers'?");
  }
}
