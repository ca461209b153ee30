// Lexically constrained decoding against fairseq 0.12.2's own: fairseq-interactive --constraints
// (ordered and unordered) on the fixture models of ../shared/fixtures/fairseq-pt, with the
// constraints of tests/fixtures/fairseq-constraints/input.de (make.sh there made the expected
// lines). Then what a user gets wrong: each refused in one line.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "e2e/fairseq_lines.h"
#include "e2e/server_process.h"
#include "e2e/task.h"

using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

namespace {

// The lines of `text` that start with `kind` and a dash (S-, C-, H-...), in order.
std::vector<std::string> lines_of(const std::string& text, char kind) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l.size() > 2 && l[0] == kind && l[1] == '-') out.push_back(l);
  }
  return out;
}

// id -> the text after the id's tab, for `kind` lines (several per id joined by newlines).
std::map<int, std::vector<std::string>> by_id(const std::string& text, char kind) {
  std::map<int, std::vector<std::string>> out;
  for (const auto& l : lines_of(text, kind)) {
    const auto tab = l.find('\t');
    out[std::stoi(l.substr(2, tab - 2))].push_back(l.substr(tab + 1));
  }
  return out;
}

}  // namespace

TEST(ConstraintsFixture, FairseqInteractiveConstraintsMatchFairseq) {
  if (leanseq::test::shared_path("fixtures/fairseq-pt").empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const std::string here = leanseq::test::tests_path("fixtures/fairseq-constraints");
  for (const char* model : {"transformer", "dynamicconv", "fconv"}) {
    const std::string src = leanseq::test::shared_path(std::string("fixtures/fairseq-pt/") + model);
    for (const char* order : {"ordered", "unordered"}) {
      const std::string what = std::string(model) + " --constraints " + order;
      std::string out;
      ASSERT_EQ(run_command(kCli + " fairseq-interactive " + src + " --path " + src + "/model.pt --cpu --beam 5 " +
                                "--buffer-size 16 --batch-size 16 --source-lang de --target-lang en --bpe sentencepiece " +
                                "--sentencepiece-model " + src + "/spm.model --constraints " + order + " < " + here +
                                "/input.de 2>/dev/null",
                            out),
                0)
          << out;
      const std::string expected = read_text(here + "/" + model + "." + order + ".txt");
      EXPECT_EQ(lines_of(out, 'S'), lines_of(expected, 'S')) << what;
      EXPECT_EQ(lines_of(out, 'C'), lines_of(expected, 'C')) << what;
      leanseq::test::compare_fairseq_lines(what, expected, out, true);
      // Every translation holds its constraints' subwords (in their order, for ordered ones).
      const auto constraints = by_id(out, 'C');
      const auto hyps = by_id(out, 'H');
      for (const auto& [id, cs] : constraints) {
        const std::string h = " " + hyps.at(id).front().substr(hyps.at(id).front().find('\t') + 1) + " ";
        size_t from = 0;
        for (const auto& c : cs) {
          const auto at = h.find(" " + c + " ", std::string(order) == "ordered" ? from : 0);
          ASSERT_NE(at, std::string::npos) << what << " sentence " << id << ": " << c << " not in" << h;
          from = at + c.size() + 1;
        }
      }
    }
  }
}

// `leanseq translate --constraints` on an imported checkpoint translates as fairseq-interactive
// does; a line whose constraint is empty gets an empty line and a message naming it, the others
// are translated.
TEST(ConstraintsFixture, TranslateTakesConstraintsAndNamesABadLine) {
  if (leanseq::test::shared_path("fixtures/fairseq-pt").empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const std::string src = leanseq::test::shared_path("fixtures/fairseq-pt/transformer");
  const std::string here = leanseq::test::tests_path("fixtures/fairseq-constraints");
  const auto dir = temp_dir("constraints");
  const std::string model = leanseq::test::import_fairseq_fixture("transformer", dir);
  std::string out;
  ASSERT_EQ(run_command(kCli + " translate --checkpoint " + model + " --batch-size 16 --constraints unordered -o " +
                            dir + "/out.en < " + here + "/input.de",
                        out),
            0)
      << out;
  out = read_text(dir + "/out.en");
  const auto expected = by_id(read_text(here + "/transformer.unordered.txt"), 'D');
  std::istringstream got(out);
  int id = 0;
  for (std::string l; std::getline(got, l); ++id) {
    const auto& d = expected.at(id).front();
    EXPECT_EQ(l, d.substr(d.find('\t') + 1)) << "line " << id + 1;
  }
  EXPECT_EQ(id, 50);

  std::ofstream(dir + "/bad.de") << "Ein Hund.\tdog\nEine Katze.\t\tcat\nEin Haus.\thouse\n";
  ASSERT_EQ(run_command(kCli + " translate --checkpoint " + model + " --constraints --input " + dir + "/bad.de", out), 0)
      << out;
  EXPECT_NE(out.find(dir + "/bad.de:2: an empty constraint, an empty translation written"), std::string::npos) << out;
  ASSERT_EQ(run_command(kCli + " translate --checkpoint " + model + " --constraints --input " + dir + "/bad.de -o " +
                            dir + "/bad.en",
                        out),
            0);
  const std::string plain = read_text(dir + "/bad.en");
  std::istringstream three(plain);
  std::vector<std::string> got_lines;
  for (std::string l; std::getline(three, l);) got_lines.push_back(l);
  ASSERT_EQ(got_lines.size(), 3u) << plain;
  EXPECT_NE(got_lines[0].find("dog"), std::string::npos) << plain;
  EXPECT_EQ(got_lines[1], "");
  EXPECT_NE(got_lines[2].find("house"), std::string::npos) << plain;

  // Usage errors: exit 2, one line naming the flag.
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--constraints sideways", "--constraints: ordered or unordered, got 'sideways'"},
           {"--constraints --sampling", "constraints go with beam search, not sampling"}}) {
    EXPECT_EQ(run_command("echo Hallo | " + kCli + " translate --checkpoint " + model + " " + flags, out), 2) << flags;
    EXPECT_NE(out.find(message), std::string::npos) << out;
  }
  EXPECT_EQ(run_command(kCli + " fairseq-generate " + src + " --path " + src + "/model.pt --constraints", out), 2);
  EXPECT_NE(out.find("--constraints: fairseq-generate reads none"), std::string::npos) << out;
}

// `leanseq serve`'s /v1/translate takes "constraints" (and "constraint_order"): the translations
// are fairseq-interactive's; a constraint that is empty, or a list of the wrong shape, is a 400
// with a JSON error, and the server goes on serving.
TEST(ConstraintsFixture, ServeTakesConstraints) {
  if (leanseq::test::shared_path("fixtures/fairseq-pt").empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const std::string here = leanseq::test::tests_path("fixtures/fairseq-constraints");
  const auto dir = temp_dir("constraints-serve");
  const std::string model = leanseq::test::import_fairseq_fixture("transformer", dir);
  leanseq::test::ServerProcess server("--beam 5", dir, "--checkpoint " + model);
  httplib::Client client("127.0.0.1", server.port());
  // Sentences 1 to 5 of the fixture, with their constraints.
  std::vector<std::string> sources;
  std::vector<std::vector<std::string>> constraints;
  std::istringstream input(read_text(here + "/input.de"));
  std::string line;
  for (int i = 0; std::getline(input, line) && i < 6; ++i) {
    if (i == 0) continue;
    std::vector<std::string> fields;
    std::istringstream f(line);
    for (std::string field; std::getline(f, field, '\t');) fields.push_back(field);
    sources.push_back(fields.front());
    constraints.emplace_back(fields.begin() + 1, fields.end());
  }
  for (const char* order : {"ordered", "unordered"}) {
    const auto expected = by_id(read_text(here + "/transformer." + order + ".txt"), 'D');
    auto r = client.Post("/v1/translate",
                         nlohmann::json{{"texts", sources}, {"constraints", constraints}, {"constraint_order", order}}.dump(),
                         "application/json");
    ASSERT_TRUE(r) << server.log();
    ASSERT_EQ(r->status, 200) << r->body;
    const auto body = nlohmann::json::parse(r->body);
    for (size_t i = 0; i < sources.size(); ++i) {
      const auto& d = expected.at(static_cast<int>(i) + 1).front();
      EXPECT_EQ(body["translations"][i]["text"], d.substr(d.find('\t') + 1)) << order << " sentence " << i + 1;
    }
  }
  // One text: a list of strings.
  auto one = client.Post("/v1/translate", nlohmann::json{{"text", sources[0]}, {"constraints", constraints[0]}}.dump(),
                         "application/json");
  ASSERT_TRUE(one);
  ASSERT_EQ(one->status, 200) << one->body;
  const std::string d1 = by_id(read_text(here + "/transformer.ordered.txt"), 'D').at(1).front();
  EXPECT_EQ(nlohmann::json::parse(one->body)["translations"][0]["text"], d1.substr(d1.find('\t') + 1));
  for (const auto& [body, message] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"text", "Ein Hund."}, {"constraints", {"dog", "  "}}}, "constraints[1] is empty"},
           {{{"text", "Ein Hund."}, {"constraints", "dog"}}, "constraints must be a list of strings"},
           {{{"texts", {"Ein Hund.", "Eine Katze."}}, {"constraints", {{"dog"}}}}, "one list of strings per text"},
           {{{"text", "Ein Hund."}, {"constraints", {"dog"}}, {"constraint_order", "sideways"}}, "constraint_order must be"},
           {{{"text", "Ein Hund."}, {"constraint_order", "ordered"}}, "constraint_order goes with constraints"}}) {
    auto r = client.Post("/v1/translate", body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body.dump() << " " << r->body;
    EXPECT_NE(nlohmann::json::parse(r->body)["error"].get<std::string>().find(message), std::string::npos) << r->body;
  }
  auto after = client.Post("/v1/translate", R"({"text": "Ein Hund."})", "application/json");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
  EXPECT_EQ(server.stop(), 0);
}
