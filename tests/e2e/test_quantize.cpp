// `leanseq quantize` and `translate --compute-type`: a quantized checkpoint and int8 products on a
// float32 checkpoint translate the task's test set mostly as float32 does, the startup log names
// the type in use, and bad values are usage errors.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "e2e/task.h"

using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

int same_lines(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  int n = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] == b[i];
  return n;
}

}  // namespace

TEST(Quantize, Int8ModelsTranslateMostSentencesAsFloat32Does) {
  const auto& ck = leanseq::test::tiny_checkpoint();
  const auto task = ck.substr(0, ck.rfind("/ck/"));
  const auto dir = temp_dir("quantize");
  const std::string test = task + "/test.src";
  auto translate = [&](const std::string& checkpoint, const std::string& flags, std::string* log = nullptr) {
    std::string out;
    const int rc = run_command(kCli + " translate --checkpoint " + checkpoint + " -i " + test + " -o " + dir +
                                   "/hyp.txt --beam 5 " + flags,
                               out);
    EXPECT_EQ(rc, 0) << out;
    if (log) *log = out;
    return lines_of(read_text(dir + "/hyp.txt"));
  };
  std::string log;
  const auto f32 = translate(ck, "", &log);
  ASSERT_EQ(f32.size(), 100u);
  EXPECT_NE(log.find("compute type float32"), std::string::npos) << log;

  const auto int8 = translate(ck, "--compute-type int8", &log);
  EXPECT_NE(log.find("compute type int8"), std::string::npos) << log;
  const auto bf16 = translate(ck, "--compute-type bfloat16");

  std::string out;
  ASSERT_EQ(run_command(kCli + " quantize --checkpoint " + ck + " --out " + dir + "/q8.pt", out), 0) << out;
  EXPECT_NE(out.find("% of the"), std::string::npos) << out;
  const auto q8 = translate(dir + "/q8.pt", "", &log);  // default: the checkpoint's own type
  EXPECT_NE(log.find("compute type int8"), std::string::npos) << log;
  const auto q8_as_float = translate(dir + "/q8.pt", "--compute-type float32", &log);
  EXPECT_NE(log.find("compute type float32"), std::string::npos) << log;

  for (const auto* v : {&int8, &bf16, &q8, &q8_as_float}) {
    ASSERT_EQ(v->size(), 100u);
    EXPECT_GE(same_lines(*v, f32), 50);
  }
  std::cerr << "identical to float32 of 100: int8 " << same_lines(int8, f32) << ", bfloat16 " << same_lines(bf16, f32)
            << ", int8 checkpoint " << same_lines(q8, f32) << "\n";

  // Usage errors name the option and exit 2; a missing checkpoint exits 1.
  EXPECT_EQ(run_command(kCli + " translate --checkpoint " + ck + " --compute-type int4 < /dev/null", out), 2) << out;
  EXPECT_NE(out.find("--compute-type"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " quantize --checkpoint " + ck + " --out " + dir + "/x.pt --type int4", out), 2) << out;
  EXPECT_EQ(run_command(kCli + " quantize --checkpoint " + dir + "/missing.pt --out " + dir + "/x.pt", out), 1) << out;
  EXPECT_NE(out.find("missing.pt"), std::string::npos) << out;
  EXPECT_FALSE(std::ifstream(dir + "/x.pt").good());
}
