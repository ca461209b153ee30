// CTranslate2 models (tests/fixtures/ctranslate2, written by CTranslate2 4.8.1's own converters and
// spec API: make.py) decoded by `leanseq translate` straight from their directories, against
// CTranslate2's own translations; imported with `leanseq import-ctranslate2`; an Argos Translate
// package translating raw text, and served with another beside it (serve --argos-packages); and
// hostile model.bin files, each refused with one line.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "e2e/server_process.h"
#include "e2e/task.h"

using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;
using leanseq::test::write_text;

namespace {

std::string fixture(const std::string& name) { return leanseq::test::tests_path("fixtures/ctranslate2/" + name); }

// The standard output of `cmd` alone (run_command adds the standard error to it).
int run_quiet(const std::string& cmd, std::string& out) { return run_command("{ " + cmd + " 2>/dev/null; }", out); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// How many of `model`'s translations of its input.txt (tokens) equal CTranslate2's in
// out.NAME.txt, and how many of those with their alignments equal to CTranslate2's in align.NAME.txt
// (`name`: greedy or beam5).
std::pair<int, int> equal_lines(const std::string& model, const std::string& name, const std::string& flags) {
  std::string out;
  const std::string dir = fixture(model.substr(model.rfind('/') + 1));
  const int rc = run_quiet(kCli + " translate --checkpoint " + model + " --input-format tokens -i " + dir +
                               "/input.txt --max-len-b 64 --compute-type float32 --print-alignment " + flags,
                           out);
  EXPECT_EQ(rc, 0) << out;
  const auto ours = lines_of(out), theirs = lines_of(read_text(dir + "/out." + name + ".txt")),
             alignments = lines_of(read_text(dir + "/align." + name + ".txt"));
  EXPECT_EQ(ours.size(), theirs.size()) << out.substr(0, 500);
  EXPECT_EQ(alignments.size(), theirs.size()) << dir;
  std::pair<int, int> equal{0, 0};
  for (size_t i = 0; i < ours.size() && i < theirs.size() && i < alignments.size(); ++i) {
    const auto tab = ours[i].find('\t');
    EXPECT_NE(tab, std::string::npos) << ours[i];
    if (ours[i].substr(0, tab) != theirs[i]) continue;
    ++equal.first;
    equal.second += ours[i].substr(tab + 1) == alignments[i];
  }
  return equal;
}

// Each (model directory, message): translate refuses the model with exit 1 and one line holding
// the message.
template <size_t N>
void expect_refused_in_one_line(const std::pair<std::string, std::string> (&cases)[N]) {
  for (const auto& [model, message] : cases) {
    std::string out;
    const int rc = run_command(kCli + " translate --checkpoint " + model + " -i /dev/null", out);
    EXPECT_EQ(rc, 1) << model << ": " << out;
    EXPECT_NE(out.find(message), std::string::npos) << model << ": " << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
}

struct Case {
  const char* dir;
  int greedy, beam5;  // at least this many of 50 lines equal CTranslate2's
};

}  // namespace

TEST(CTranslate2Models, TranslateAsCTranslate2DoesFromTheirDirectories) {
  // float32 models; quantized ones against CTranslate2's own float32 reading of the same file.
  // Every line is equal on the CPU the fixtures were made on (before leanseq shared </s>'s
  // probability at the first step as CTranslate2 does, 46 of 50 were at beam 5 on spec-postnorm);
  // the bounds leave another CPU's sums room for a near tie.
  const Case cases[] = {{"onmt-relu", 49, 49},          {"onmt-gelu-tied", 49, 49},       {"spec-postnorm", 49, 49},
                        {"fairseq", 49, 49},            {"onmt-relu-int8", 45, 45},       {"onmt-relu-int16", 45, 45},
                        {"onmt-relu-float16", 45, 45},  {"onmt-gelu-tied-bfloat16", 45, 45}, {"fairseq-int8", 45, 45},
                        {"onmt-fast-gelu", 49, 49},     {"onmt-silu", 49, 49}};
  // Alignments, from each model's alignment layer and heads as CTranslate2 returns attention (the
  // last layer's first head; onmt-gelu-tied's first two heads of the layer before the last; fairseq's
  // every head) over the source's tokens (spec-postnorm's <s> and </s> not counted), equal those of
  // CTranslate2 on every line whose translation is equal (one line is left to another CPU's near
  // tie; every line agrees here, under AVX2 and SSE4.1 too, and none without the heads or the <s>
  // shift).
  for (const auto& c : cases) {
    const std::string dir = fixture(c.dir);
    for (const auto& [name, flags, bound] : {std::tuple{"greedy", "--greedy", c.greedy}, {"beam5", "--beam 5", c.beam5}}) {
      const auto [translations, alignments] = equal_lines(dir, name, flags);
      EXPECT_GE(translations, bound) << c.dir << " " << name;
      EXPECT_GE(alignments, translations - 1) << c.dir << " " << name << ": alignments differ from CTranslate2's";
    }
  }
}

// A file of binary version 5, from before config.json: how sources are framed and decoding starts
// was said by flags in model.bin. spec-postnorm's model.bin made version 5, with its framing (<s>
// and </s> around sources, decoding started with </s>) as such flags and no config.json, translates
// and aligns as the version 6 file does.
TEST(CTranslate2Models, AVersion5FileFramesByTheFlagsInItsModelBin) {
  namespace fs = std::filesystem;
  const std::string v6 = read_text(fixture("spec-postnorm/model.bin"));
  auto u32 = [](uint32_t v) {  // little-endian, as CTranslate2 writes (and this test's hosts are)
    return std::string{static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 24)};
  };
  auto at = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(v6[i])); };
  ASSERT_EQ(at(0), 6u);
  const size_t spec_end = 4 + 2 + (at(4) | at(5) << 8), count_at = spec_end + 4;  // u16-long spec name, revision
  const uint32_t count = at(count_at) | at(count_at + 1) << 8 | at(count_at + 2) << 16 | at(count_at + 3) << 24;
  auto flag = [&](const std::string& name, char value) {  // a scalar int8 (type code 1) variable
    const std::string n = name + '\0';
    return std::string{static_cast<char>(n.size()), 0} + n + '\0' + '\1' + u32(1) + value;
  };
  const std::string v5 = u32(5) + v6.substr(4, count_at - 4) + u32(count + 3) + flag("with_source_bos", 1) +
                         flag("with_source_eos", 1) + flag("with_target_bos", 0) + v6.substr(count_at + 4);
  const auto dir = temp_dir("ct2-v5") + "/spec-postnorm";
  fs::create_directories(dir);
  write_text(dir + "/model.bin", v5);
  fs::copy_file(fixture("spec-postnorm/shared_vocabulary.txt"), dir + "/shared_vocabulary.txt");
  for (const auto& [name, flags] : {std::pair{"greedy", "--greedy"}, {"beam5", "--beam 5"}}) {
    const auto [translations, alignments] = equal_lines(dir, name, flags);
    EXPECT_GE(translations, 49) << name;
    EXPECT_GE(alignments, translations - 1) << name;
  }
}

TEST(CTranslate2Models, ImportKeepsTheStorageTypeAndTheTranslations) {
  const auto dir = temp_dir("ct2-import");
  for (const char* name : {"onmt-relu-int8", "spec-postnorm"}) {
    const std::string ck = dir + "/" + name + ".pt";
    std::string out;
    ASSERT_EQ(run_command(kCli + " import-ctranslate2 " + fixture(name) + " --out " + ck, out), 0) << out;
    if (std::string(name) == "onmt-relu-int8") {
      EXPECT_NE(out.find("int8 weights"), std::string::npos) << out;
    }
    std::string a, b;
    // In float32: the int8 weights stored by the import (the same int8 values; their scales are
    // leanseq's, 1/CTranslate2's, a few ulps apart) read back to nearly the directory's values.
    const std::string flags = " --input-format tokens -i " + fixture(name) + "/input.txt --beam 5 --compute-type float32";
    ASSERT_EQ(run_quiet(kCli + " translate --checkpoint " + ck + flags, a), 0);
    ASSERT_EQ(run_quiet(kCli + " translate --checkpoint " + fixture(name) + flags, b), 0);
    const auto x = lines_of(a), y = lines_of(b);
    ASSERT_EQ(x.size(), y.size());
    int equal = 0;
    for (size_t i = 0; i < x.size(); ++i) equal += x[i] == y[i];
    EXPECT_GE(equal, 47) << name << ": the imported checkpoint translates differently";
  }
}

TEST(CTranslate2Models, AnArgosPackageTranslatesRawText) {
  const std::string spm = leanseq::test::shared_path("fixtures/fairseq-pt/transformer/spm.model");
  if (spm.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt/transformer/spm.model");
  namespace fs = std::filesystem;
  const auto dir = temp_dir("argos");
  const std::string pkg = dir + "/translate-de_en-1_0";
  fs::create_directories(pkg);
  fs::copy(fixture("fairseq"), pkg + "/model", fs::copy_options::recursive);
  fs::copy_file(spm, pkg + "/sentencepiece.model");
  write_text(pkg + "/metadata.json", R"({"package_version": "1.0", "from_code": "de", "to_code": "en"})");
  // The raw sentences the fixture's SentencePiece pieces came from, and CTranslate2's as text.
  auto text_of = [](const std::string& pieces) {
    std::string t;
    for (const auto& line : lines_of(pieces)) {
      std::string s;
      for (char ch : line) s += ch == ' ' ? std::string() : std::string(1, ch);
      for (size_t p; (p = s.find("\xe2\x96\x81")) != std::string::npos;) s.replace(p, 3, " ");
      t += s.substr(s.find_first_not_of(' ')) + "\n";
    }
    return t;
  };
  write_text(dir + "/input.de", text_of(read_text(fixture("fairseq/input.txt"))));
  const std::string expected = text_of(read_text(fixture("fairseq/out.greedy.txt")));
  std::string out;
  ASSERT_EQ(run_command("cd " + dir + " && python3 -c \"import shutil; shutil.make_archive('de_en', 'zip', '.', "
                        "'translate-de_en-1_0')\" && mv de_en.zip de_en.argosmodel", out), 0) << out;
  for (const std::string& model : {pkg, dir + "/de_en.argosmodel"}) {
    ASSERT_EQ(run_quiet(kCli + " translate --checkpoint " + model + " --greedy -i " + dir + "/input.de", out), 0);
    EXPECT_EQ(out, expected) << model;
  }

  // serve --argos-packages: a directory as Argos Translate installs packages (the unpacked one),
  // beside a zipped one whose metadata names another pair (the same weights), loaded lazily.
  const std::string packages = dir + "/packages";
  fs::create_directories(packages);
  fs::copy(pkg, packages + "/translate-de_en-1_0", fs::copy_options::recursive);
  write_text(pkg + "/metadata.json", R"({"package_version": "1.0", "from_code": "en", "to_code": "de"})");
  ASSERT_EQ(run_command("cd " + dir + " && python3 -c \"import shutil; shutil.make_archive('packages/en_de', 'zip', '.', "
                        "'translate-de_en-1_0')\" && mv packages/en_de.zip packages/en_de.argosmodel", out), 0) << out;
  leanseq::test::ServerProcess server("--greedy --lazy", dir, "--argos-packages " + packages);
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  const auto languages = client.Get("/languages");
  ASSERT_TRUE(languages && languages->status == 200);
  EXPECT_NE(languages->body.find("\"de\""), std::string::npos) << languages->body;
  EXPECT_NE(languages->body.find("\"en\""), std::string::npos) << languages->body;
  const auto texts = lines_of(read_text(dir + "/input.de"));
  for (const auto& [source, target] : {std::pair<std::string, std::string>{"de", "en"}, {"en", "de"}}) {
    const nlohmann::json request = {{"texts", texts}, {"source", source}, {"target", target}};
    const auto r = client.Post("/v1/translate", request.dump(), "application/json");
    ASSERT_TRUE(r) << server.log();
    ASSERT_EQ(r->status, 200) << r->body;
    const auto answer = nlohmann::json::parse(r->body);
    std::string got;
    for (const auto& t : answer["translations"]) got += t["text"].get<std::string>() + "\n";
    EXPECT_EQ(got, expected) << source << "->" << target << ": " << r->body.substr(0, 500);
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
  // A directory without packages: one line, exit 2.
  fs::create_directories(dir + "/empty");
  EXPECT_EQ(run_command(kCli + " serve --argos-packages " + dir + "/empty", out), 2);
  EXPECT_NE(out.find("no Argos Translate package there"), std::string::npos) << out;
  // With --checkpoint: one or the other.
  EXPECT_EQ(run_command(kCli + " serve --checkpoint " + pkg + " --argos-packages " + packages, out), 2);
  EXPECT_NE(out.find("--argos-packages DIR (which --model or --models may join)"), std::string::npos) << out;
}

TEST(CTranslate2Models, HostileModelFilesGiveOneLineAndExitOne) {
  const std::string good = read_text(fixture("onmt-relu/model.bin"));
  const auto dir = temp_dir("ct2-hostile");
  auto with_bin = [&](const std::string& name, const std::string& bytes) {
    const std::string d = dir + "/" + name;
    std::filesystem::copy(fixture("onmt-relu"), d, std::filesystem::copy_options::recursive);
    write_text(d + "/model.bin", bytes);
    return d;
  };
  auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  // The first variable's header: version (4), spec name (2 + 16), revision (4), count (4), then
  // its name's length.
  const size_t first = 4 + 2 + 16 + 4 + 4;
  const uint16_t name_len = static_cast<uint8_t>(good[first]) | static_cast<uint8_t>(good[first + 1]) << 8;
  const size_t rank_at = first + 2 + name_len;
  std::string overflow = good, bad_type = good, cycle = good;
  overflow.replace(first - 4, 4, u32(0xFFFFFFFFu));  // more variables than the file holds
  bad_type[rank_at + 1] = 9;                          // a scalar's type code
  // The alias at the end names itself.
  const std::string alias = "encoder/position_encodings/encodings";
  const size_t at = cycle.rfind(alias);
  ASSERT_NE(at, std::string::npos);
  cycle.replace(at + alias.size() + 1 + 2, alias.size(), alias);
  cycle.resize(at + alias.size() + 1 + 2 + alias.size() + 1);
  const std::pair<std::string, std::string> cases[] = {
      {with_bin("truncated", good.substr(0, good.size() / 2)), "truncated"},
      {with_bin("overflow", overflow), "overflow/model.bin: variable "},
      {with_bin("type", bad_type), "unknown type code 9"},
      {with_bin("version", u32(99) + good.substr(4)), "binary version 99"},
      {with_bin("cycle", cycle), "alias cycle"}};
  expect_refused_in_one_line(cases);
}

// A decoder/alignment_layer or alignment_heads (int16 scalars in onmt-gelu-tied's model.bin: -2 and
// 2) that names no layer or more heads than the decoder has is refused with one line, exit 1 (the
// model config's own check, as for any model file).
TEST(CTranslate2Models, AlignmentAttributesOutsideTheDecoderAreRefused) {
  const std::string good = read_text(fixture("onmt-gelu-tied/model.bin"));
  const auto dir = temp_dir("ct2-alignment");
  auto with_value = [&](const std::string& name, int16_t value) {
    const std::string key = "decoder/" + name + '\0';
    const size_t at = good.find(key);
    EXPECT_NE(at, std::string::npos) << key;
    std::string bytes = good;
    const size_t value_at = at + key.size() + 1 + 1 + 4;  // rank 0, type code, byte count 2
    EXPECT_EQ(bytes[value_at - 4], 2) << name;
    bytes[value_at] = static_cast<char>(value & 0xFF), bytes[value_at + 1] = static_cast<char>((value >> 8) & 0xFF);
    const std::string d = dir + "/" + name + std::to_string(value);
    std::filesystem::copy(fixture("onmt-gelu-tied"), d, std::filesystem::copy_options::recursive);
    write_text(d + "/model.bin", bytes);
    return d;
  };
  const std::pair<std::string, std::string> cases[] = {
      {with_value("alignment_layer", 9), "model.decoder.alignment_layer 9 is not a layer of 2"},
      {with_value("alignment_layer", -9), "model.decoder.alignment_layer -9 is not a layer of 2"},
      {with_value("alignment_heads", 99), "model.decoder.alignment_heads 99 exceeds decoder.attention_heads 4"},
      {with_value("alignment_heads", -1), "model.decoder.alignment_heads"}};
  expect_refused_in_one_line(cases);
}
