// Which model a request means (serve/models.h): by name, by pair, "auto" where one pair matches,
// and 400 naming what is served otherwise; LibreTranslate's /languages for several pairs.
#include <gtest/gtest.h>

#include "leanseq/serve/models.h"
#include "leanseq/serve/request.h"

using leanseq::serve::ModelInfo;
using leanseq::serve::Refusal;
using leanseq::serve::route;

namespace {
const std::vector<ModelInfo> kModels = {{"de-en", "de", "en"}, {"en-de", "en", "de"}, {"fr-en", "fr", "en"}};

std::string refusal(const std::string& name, const std::string& source, const std::string& target) {
  try {
    route(kModels, name, source, target);
  } catch (const Refusal& r) {
    EXPECT_EQ(r.status, 400);
    return r.message;
  }
  return "";
}
}  // namespace

TEST(Routing, ByNameByPairAndAuto) {
  EXPECT_EQ(route(kModels, "", "de", "en"), 0u);
  EXPECT_EQ(route(kModels, "", "en", "de"), 1u);
  EXPECT_EQ(route(kModels, "", "auto", "de"), 1u);  // one model writes de
  EXPECT_EQ(route(kModels, "", "fr", ""), 2u);      // one model reads fr
  EXPECT_EQ(route(kModels, "en-de", "", ""), 1u);
  EXPECT_EQ(route(kModels, "fr-en", "auto", "en"), 2u);
  EXPECT_EQ(route({{"only", "de", "en"}}, "", "", ""), 0u);
  EXPECT_EQ(refusal("", "auto", "en"), "auto to en is ambiguous: give source (or model); this server translates with "
                                       "de-en (de to en), en-de (en to de), fr-en (fr to en)");
  EXPECT_EQ(refusal("", "de", "fr").substr(0, 28), "de to fr is not supported: t");
  EXPECT_EQ(refusal("xx", "", "").substr(0, 19), "no model called xx:");
  EXPECT_EQ(refusal("de-en", "fr", ""), "model de-en translates de to en, not fr to any");
}

TEST(Routing, LanguagesListEveryPair) {
  EXPECT_EQ(leanseq::serve::languages_json(kModels),
            nlohmann::json::parse(R"([{"code":"de","name":"German","targets":["en"]},
                                      {"code":"en","name":"English","targets":["de"]},
                                      {"code":"fr","name":"French","targets":["en"]}])"));
}
