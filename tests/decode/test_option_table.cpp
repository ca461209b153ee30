// The decoding options' table (decode/option_table.h): every default inside its declared range,
// every range enforced by set_option and by check_options with the same line, a form's text read
// as the option's type, and Translator::translate refusing options out of range from C++.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "leanseq/core/error.h"
#include "leanseq/decode/option_table.h"
#include "leanseq/decode/translator.h"
#include "leanseq/models/registry.h"
#include "support/fixtures.h"

using namespace leanseq;
using decode::DecodingOption;

namespace {
std::string error_of(const std::function<void()>& f) { return test::error_of<ConfigError>(f); }
}  // namespace

TEST(DecodingOptions, EachIsDeclaredOnceWithItsDefaultInsideItsRange) {
  std::set<std::string> names, pythons, flags;
  for (const auto& o : decode::decoding_options()) {
    EXPECT_TRUE(names.insert(o.name).second) << o.name;
    EXPECT_TRUE(pythons.insert(o.python_name()).second) << o.name;
    EXPECT_TRUE(flags.insert(o.flags).second) << o.name;
    EXPECT_EQ(decode::find_decoding_option(o.name), &o);
    EXPECT_EQ(decode::find_decoding_option(o.python_name(), true), &o);
  }
  EXPECT_EQ(decode::find_decoding_option("bean"), nullptr);
  EXPECT_NO_THROW(decode::check_options(decode::TranslateOptions{}));
}

TEST(DecodingOptions, EveryRangeIsEnforcedWithOneLineBySetOptionAndByCheckOptions) {
  for (const auto& o : decode::decoding_options()) {
    if (o.kind() != DecodingOption::Kind::integer && o.kind() != DecodingOption::Kind::number) continue;
    SCOPED_TRACE(o.name);
    const bool integer = o.kind() == DecodingOption::Kind::integer;
    // Just past each end (or far past it), NaN and infinity for real options.
    std::vector<double> bad = {o.range.lo_open ? o.range.lo : o.range.lo - 1, o.range.hi_open ? o.range.hi : o.range.hi + 1};
    if (!integer) bad.insert(bad.end(), {std::nan(""), std::numeric_limits<double>::infinity()});
    for (double v : bad) {
      if (o.off && v == *o.off) continue;
      decode::TranslateOptions t;
      const decode::OptionValue value = integer ? decode::OptionValue(static_cast<int64_t>(v)) : decode::OptionValue(v);
      const std::string from_set = error_of([&] { decode::set_option(t, o, value); });
      EXPECT_EQ(from_set.rfind(std::string(o.name) + ": expected " + o.expected() + ", got ", 0), 0u) << from_set;
      // The same value put in directly is refused by check_options with the same line.
      if (integer) {
        std::get<DecodingOption::IntegerField>(o.field)(t) = static_cast<int64_t>(v);
      } else {
        std::get<DecodingOption::NumberField>(o.field)(t) = v;
      }
      EXPECT_EQ(error_of([&] { decode::check_options(t); }), from_set);
    }
    // Each end inside is taken.
    for (double v : {o.range.lo, o.range.hi}) {
      decode::TranslateOptions t;
      if (o.range.lo_open && v == o.range.lo) continue;
      if (o.name == std::string("nbest")) std::get<DecodingOption::IntegerField>(decode::find_decoding_option("beam")->field)(t) = 1024;
      const decode::OptionValue value = integer ? decode::OptionValue(static_cast<int64_t>(v)) : decode::OptionValue(v);
      EXPECT_EQ(error_of([&] { decode::set_option(t, o, value); }), "") << v;
    }
  }
}

TEST(DecodingOptions, AFormsTextIsReadAsTheOptionsTypeAndOtherTypesAreRefused) {
  decode::TranslateOptions t;
  const auto& beam = *decode::find_decoding_option("beam");
  decode::set_option(t, beam, std::string("7"));
  EXPECT_EQ(t.search.beam, 7);
  for (const char* bad : {"7x", "", "7.5", "99999999999999999999", "seven"}) {
    EXPECT_EQ(error_of([&] { decode::set_option(t, beam, std::string(bad)); }).rfind("beam: expected an integer in [1, 1024], got '", 0), 0u)
        << bad;
  }
  EXPECT_EQ(error_of([&] { decode::set_option(t, beam, 2.5); }), "beam: expected an integer in [1, 1024], got 2.5");
  EXPECT_EQ(error_of([&] { decode::set_option(t, beam, true); }), "beam: expected an integer in [1, 1024], got true");
  const auto& lenpen = *decode::find_decoding_option("lenpen");
  decode::set_option(t, lenpen, int64_t{2});
  EXPECT_EQ(t.search.lenpen, 2.0);
  decode::set_option(t, lenpen, std::string("0.5"));
  EXPECT_EQ(t.search.lenpen, 0.5);
  const auto& sampling = *decode::find_decoding_option("sampling");
  decode::set_option(t, sampling, std::string("true"));
  EXPECT_TRUE(t.search.sampling);
  EXPECT_EQ(error_of([&] { decode::set_option(t, sampling, int64_t{3}); }), "sampling: expected true or false, got 3");
  const auto& prefix = *decode::find_decoding_option("prefix");
  EXPECT_EQ(error_of([&] { decode::set_option(t, prefix, std::string("a\xff")); }),
            "prefix: expected UTF-8 text, got bytes that are not UTF-8");
  // Combinations: nbest within beam, top-k or top-p only with sampling.
  decode::TranslateOptions c;
  c.search.beam = 2, c.search.nbest = 3;
  EXPECT_EQ(error_of([&] { decode::check_options(c); }), "nbest: expected at most beam (2), got 3");
  c = {};
  c.search.sampling_topk = 5;
  EXPECT_EQ(error_of([&] { decode::check_options(c); }), "sampling_topk and sampling_topp go with sampling");
}

// A C++ caller's options are checked inside the engine too, before any work (the sources here are
// token ids or tokens: the translator has no text pipeline).
TEST(DecodingOptions, TranslatorTranslateRefusesOptionsOutOfRange) {
  data::Dictionary dict;
  for (const char* w : {"a", "b", "c"}) dict.add(w);
  torch::manual_seed(3);
  auto model = models::build_model(*models::registry().preset_config("transformer_tiny"),
                                   {dict.size(), dict.size(), true});
  decode::Translator tr(model, dict, dict, nullptr, nullptr);
  const std::vector<std::vector<int64_t>> sources{{4, 5, 6, data::Dictionary::kEos}};
  decode::TranslateOptions o;
  o.input_format = decode::InputFormat::tokens;
  o.search.beam = 0;
  EXPECT_EQ(error_of([&] { tr.translate_ids(sources, o); }), "beam: expected an integer in [1, 1024], got 0");
  o.search.beam = 2;
  o.search.temperature = std::nan("");
  EXPECT_EQ(error_of([&] { tr.translate_ids(sources, o); }),
            "temperature: expected a finite number in [1e-06, 1e+06], got nan");
  o.search.temperature = 1;
  o.max_sentences = 0;
  EXPECT_EQ(error_of([&] { tr.translate({"a b"}, o); }), "batch_size: expected an integer in [1, 1e+09], got 0");
}
