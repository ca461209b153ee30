// The --replace-unk dictionary reader (decode/options.h): fairseq's "source target" lines, and a
// file past its limits (bytes, entries, a line's bytes) refused with its name and line.
#include <gtest/gtest.h>

#include <string>

#include "leanseq/decode/options.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {

std::string write_dict(const std::string& dir, const std::string& text) {
  static int files = 0;
  return test::write_text(dir + "/dict" + std::to_string(++files) + ".txt", text);
}

}  // namespace

TEST(ReplaceUnkDict, ReadsSourceTargetLinesAndRefusesAFilePastItsLimits) {
  const auto dir = test::temp_dir("replace-unk");
  const auto path = write_dict(dir, "Haus house extra\n\nBaum tree\nHaus home\n");
  const auto dict = decode::read_replace_unk_dict(path);
  ASSERT_EQ(dict.size(), 2u);
  EXPECT_EQ(dict.at("Haus"), "home");  // a later line wins
  EXPECT_EQ(dict.at("Baum"), "tree");
  EXPECT_NE(test::data_error_of([&] { decode::read_replace_unk_dict(write_dict(dir, "a b\nlonely\n")); }).find(":2: "),
            std::string::npos);

  decode::ReplaceUnkLimits small;
  small.max_entries = 2;
  const auto three = write_dict(dir, "a x\nb y\nc z\n");
  EXPECT_NE(test::data_error_of([&] { decode::read_replace_unk_dict(three, small); }).find(three + ":3: a --replace-unk dictionary of more than 2 words"),
            std::string::npos);
  small = {};
  small.max_bytes = 5;
  EXPECT_NE(test::data_error_of([&] { decode::read_replace_unk_dict(three, small); }).find(three + ":2: a --replace-unk dictionary past 5 bytes"),
            std::string::npos);
  small = {};
  small.max_line_bytes = 8;
  const auto long_line = write_dict(dir, "a x\nlongword translation\n");
  EXPECT_NE(test::data_error_of([&] { decode::read_replace_unk_dict(long_line, small); }).find(long_line + ":2: a --replace-unk line longer than 8 bytes"),
            std::string::npos);
  EXPECT_EQ(decode::read_replace_unk_dict(three).size(), 3u);  // within the default limits
}
