#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

#include <filesystem>
#include <fstream>

#include "leanseq/core/config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
struct Demo : Configurable {
  int64_t layers = 6;
  double lr = 1e-3;
  bool share = false;
  std::string name = "x";
  void visit(ConfigVisitor& v) override {
    v.field("encoder.layers", layers, "layers");
    v.field("optim.lr", lr, "learning rate");
    v.field("share", share, "share embeddings");
    v.field("name", name, "a name");
  }
};
}  // namespace

TEST(Config, YamlAndOverridesApplyInOrder) {
  Demo d;
  auto vals = parse_yaml_text("encoder:\n  layers: 3\noptim: {lr: 0.5}\n", "cfg.yaml");
  vals.merge(parse_assignments({"share=true", "optim.lr=2e-4"}, "--set"));
  apply_config(d, vals);
  EXPECT_EQ(d.layers, 3);
  EXPECT_DOUBLE_EQ(d.lr, 2e-4);
  EXPECT_TRUE(d.share);
}

TEST(Config, UnknownKeyIsRejectedByNameWithHint) {
  Demo d;
  try {
    apply_config(d, parse_assignments({"encoder.layer=3"}, "--set"));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--set: unknown key 'encoder.layer'; did you mean 'encoder.layers'?");
    EXPECT_EQ(e.exit_code(), 2);
  }
}

TEST(Config, BadValueNamesKeyAndExpectation) {
  Demo d;
  try {
    apply_config(d, parse_yaml_text("encoder:\n  layers: three\n", "cfg.yaml"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cfg.yaml: key 'encoder.layers': expected an integer"),
              std::string::npos);
  }
}

TEST(Config, DumpRoundTrips) {
  Demo d;
  d.layers = 9, d.lr = 0.125, d.share = true, d.name = "hello world";
  std::string y = dump_config_yaml(d);
  Demo e;
  apply_config(e, parse_yaml_text(y, "dump"));
  EXPECT_EQ(e.layers, 9);
  EXPECT_DOUBLE_EQ(e.lr, 0.125);
  EXPECT_TRUE(e.share);
  EXPECT_EQ(e.name, "hello world");
}

TEST(Io, Utf8Validation) {
  EXPECT_EQ(io::utf8_invalid_offset("héllo"), -1);
  EXPECT_EQ(io::utf8_invalid_offset(std::string("ab\xff")), 2);
  EXPECT_EQ(io::utf8_invalid_offset(std::string("\xc3")), 0);          // truncated
  EXPECT_EQ(io::utf8_invalid_offset(std::string("\xc0\xaf")), 0);      // overlong
  EXPECT_EQ(io::utf8_invalid_offset(std::string("\xed\xa0\x80")), 0);  // surrogate
}

TEST(Io, ReadLinesNamesFileAndLineOfInvalidUtf8) {
  auto dir = test::temp_dir("io");
  std::string p = dir + "/bad.txt";
  std::ofstream(p) << "fine\nalso fine\nbro\xffken\n";
  try {
    io::read_lines(p);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(p + ":3: invalid UTF-8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(io::read_lines(dir + "/missing.txt"), DataError);
}

// Lines split as getline splits them (no last empty line for a final '\n', a '\r' before it
// dropped), from a file or from standard input, whose bytes are bounded as a file's.
TEST(Io, LinesSplitAsGetlineAndStandardInputIsBounded) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"", {}}, {"\n", {""}}, {"a", {"a"}}, {"a\n", {"a"}}, {"a\r\nb", {"a", "b"}}, {"a\n\n", {"a", ""}},
      {"\r\n\r", {"", ""}}, {"a\nb\n", {"a", "b"}}};
  for (const auto& [text, lines] : cases) EXPECT_EQ(io::split_lines(text, "t"), lines) << text;
  std::istringstream input("one\ntwo\nthree\n");
  auto* saved = std::cin.rdbuf(input.rdbuf());
  EXPECT_EQ(io::read_lines("-", "file", 14), (std::vector<std::string>{"one", "two", "three"}));
  input.clear(), input.str("one\ntwo\nthree\n");
  std::cin.clear();
  try {
    io::read_lines("-", "file", 13);
    ADD_FAILURE() << "read past its bound";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "<stdin>: the input is larger than 13 bytes");
  }
  std::cin.rdbuf(saved);
  std::cin.clear();
}

TEST(Io, AtomicWriteLeavesOldFileOnFailure) {
  auto dir = test::temp_dir("io");
  std::string p = dir + "/out.txt";
  io::atomic_write_text(p, "old");
  EXPECT_THROW(io::atomic_write(p, [](const std::string& tmp) {
                 std::ofstream(tmp) << "half";
                 throw Error("boom");
               }),
               Error);
  std::ifstream in(p);
  std::string s;
  in >> s;
  EXPECT_EQ(s, "old");
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++files;
  EXPECT_EQ(files, 1);
}
