// LibreTranslate's API of `leanseq serve` over HTTP, as LibreTranslate's own API tests
// (libretranslate/tests/test_api) and its documentation's curl examples call it, on a server of
// three pairs (en-es, de-en, es-en): each translation is `leanseq translate`'s of its sentences.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2e/server_process.h"
#include "e2e/task.h"

using json = nlohmann::json;
using leanseq::test::kCli;
using leanseq::test::run_command;
using leanseq::test::ServerProcess;
using leanseq::test::temp_dir;

namespace {

std::vector<std::string> translate_lines(const std::vector<std::string>& lines, const std::string& dir) {
  std::ofstream f(dir + "/in.txt");
  for (const auto& l : lines) f << l << "\n";
  f.close();
  std::string out;
  EXPECT_EQ(run_command("{ " + kCli + " translate --checkpoint " + leanseq::test::tiny_checkpoint() + " -i " + dir +
                            "/in.txt --beam 2 --max-len-b 6 2>/dev/null; }",
                        out),
            0);
  std::vector<std::string> got;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) got.push_back(l);
  EXPECT_EQ(got.size(), lines.size());
  return got;
}

// The JSON error of a refusal, which must have `status` ("" when there is no answer).
std::string error_of(const httplib::Result& r, int status) {
  EXPECT_TRUE(r);
  if (!r) return "";
  EXPECT_EQ(r->status, status) << r->body;
  return json::parse(r->body).value("error", "");
}

struct Lt {
  std::string dir;
  std::unique_ptr<ServerProcess> server;
  std::unique_ptr<httplib::Client> client;
  explicit Lt(const std::string& flags) : dir(temp_dir("serve-lt")) {
    std::ofstream models(dir + "/models.yaml");
    for (const auto& [name, source, target] : std::vector<std::array<std::string, 3>>{
             {"en-es", "en", "es"}, {"de-en", "de", "en"}, {"es-en", "es", "en"}}) {
      models << "- name: " << name << "\n  checkpoint: " << leanseq::test::tiny_checkpoint() << "\n  source: " << source
             << "\n  target: " << target << "\n";
    }
    models.close();
    server = std::make_unique<ServerProcess>("--beam 2 --max-len-b 6 " + flags, dir, "--models " + dir + "/models.yaml");
    client = std::make_unique<httplib::Client>("127.0.0.1", server->port());
    client->set_read_timeout(60, 0);
  }
  json post(const std::string& path, const json& body, int status = 200) {
    auto r = client->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, status) << path << " " << body << ": " << r->body;
    return json::parse(r->body);
  }
};

}  // namespace

// LibreTranslate's test_api, one check each.
TEST(ServeLibreTranslate, LibreTranslatesOwnApiTestsPass) {
  Lt lt("");
  ASSERT_GT(lt.server->port(), 0);
  auto& c = *lt.client;
  auto r = c.Post("/detect", "q=Hello", "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  json j = json::parse(r->body);
  ASSERT_GE(j.size(), 1u);
  EXPECT_TRUE(j[0].contains("confidence") && j[0].contains("language")) << j;
  r = c.Post("/detect", "", "application/x-www-form-urlencoded");
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(json::parse(r->body).contains("error"));
  EXPECT_EQ(c.Get("/detect")->status, 405);
  EXPECT_EQ(c.Get("/frontend/settings")->status, 200);
  r = c.Get("/languages");
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(json::parse(r->body)[0].contains("code") && json::parse(r->body)[0].contains("name"));
  EXPECT_EQ(c.Post("/languages", "", "text/plain")->status, 405);
  r = c.Get("/health");
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body), json({{"status", "ok"}}));
  EXPECT_EQ(c.Post("/health", "", "text/plain")->status, 405);
  EXPECT_EQ(c.Get("/spec")->status, 200);
  EXPECT_EQ(json::parse(c.Get("/spec")->body)["openapi"], "3.0.3");
  EXPECT_EQ(c.Post("/spec", "", "text/plain")->status, 405);
  r = c.Post("/translate", "q=Hello&source=en&target=es&format=text", "application/x-www-form-urlencoded");
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(json::parse(r->body).contains("translatedText"));
  j = lt.post("/translate", {{"q", {"Hello", "World"}}, {"source", "en"}, {"target", "es"}, {"format", "text"}});
  EXPECT_EQ(j["translatedText"].size(), 2u);
  const std::string form = "application/x-www-form-urlencoded";
  EXPECT_EQ(error_of(c.Post("/translate", "q=Hello&source=en&target=zz&format=text", form), 400), "zz is not supported");
  EXPECT_EQ(error_of(c.Post("/translate", "source=en&target=es&format=text", form), 400),
            "Invalid request: missing q parameter");
  EXPECT_EQ(lt.server->stop(), 0) << lt.server->log();
}

// What LibreTranslate's clients use beyond its tests: alternatives, format=html, source auto,
// /translate_file and /download_file, multipart bodies, a long paragraph sentence by sentence.
TEST(ServeLibreTranslate, SentencesHtmlAutoAlternativesAndFiles) {
  Lt lt("--max-input-length 100 --max-request-bytes 65536");
  ASSERT_GT(lt.server->port(), 0);
  auto& c = *lt.client;
  // A paragraph of 40 sentences (5 000 characters), far past --max-input-length as a whole (ICU
  // breaks after '!' whatever follows; after '.' only before a capital, and these words have none).
  const std::vector<std::string> words = {"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10", "a11", "a12", "a13"};
  std::vector<std::string> sentences;
  std::string paragraph;
  for (int i = 0; i < 40; ++i) {
    std::string s;
    for (int k = 0; s.size() < 121; ++k) s += (s.empty() ? "" : " ") + words[(i * 3 + k) % words.size()];
    sentences.push_back(s + "!");
    paragraph += sentences.back() + (i == 39 ? "" : i % 10 == 9 ? "\n\n" : "  ");
  }
  ASSERT_GE(paragraph.size(), 5000u);
  const auto expected = translate_lines(sentences, lt.dir);
  std::string joined;
  for (int i = 0; i < 40; ++i) joined += expected[i] + (i == 39 ? "" : i % 10 == 9 ? "\n\n" : "  ");
  json j = lt.post("/translate", {{"q", paragraph}, {"source", "en"}, {"target", "es"}});
  EXPECT_EQ(j["translatedText"], joined);
  // The same through leanseq's own API, one text: too long for this server.
  lt.post("/v1/translate", {{"text", paragraph}, {"model", "en-es"}}, 413);

  // alternatives: the n-best's other texts, distinct.
  j = lt.post("/translate", {{"q", "a1 a2 a3"}, {"source", "en"}, {"target", "es"}, {"alternatives", 3}});
  ASSERT_TRUE(j.contains("alternatives")) << j;
  EXPECT_GE(j["alternatives"].size(), 1u);
  for (const auto& alt : j["alternatives"]) EXPECT_NE(alt, j["translatedText"]);
  // format=html: tags kept, the text translated, <code> left alone.
  const auto t = translate_lines({"a1 a2 a3", "a4 a5"}, lt.dir);
  j = lt.post("/translate", {{"q", "<p class=\"x\">a1 a2 a3</p>\n<b>a4 a5</b><code>a6</code>"}, {"source", "en"},
                             {"target", "es"}, {"format", "html"}});
  EXPECT_EQ(j["translatedText"], "<p class=\"x\">" + t[0] + "</p>\n<b>" + t[1] + "</b><code>a6</code>");
  // source auto between German and Spanish into English.
  j = lt.post("/translate", {{"q", "Ein Mann fährt mit dem Fahrrad durch die Stadt."}, {"source", "auto"}, {"target", "en"}});
  EXPECT_EQ(j["detectedLanguage"]["language"], "de") << j;
  j = lt.post("/translate", {{"q", "Un hombre monta en bicicleta por la ciudad."}, {"source", "auto"}, {"target", "en"}});
  EXPECT_EQ(j["detectedLanguage"]["language"], "es") << j;
  // A multipart body.
  httplib::MultipartFormDataItems fields = {{"q", "a1 a2 a3", "", ""}, {"source", "en", "", ""}, {"target", "es", "", ""}};
  auto r = c.Post("/translate", fields);
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["translatedText"], t[0]) << r->body;

  // /translate_file: a .txt and an .html, fetched back from /download_file.
  for (const auto& [name, content, want] : std::vector<std::array<std::string, 3>>{
           {"notes.txt", "a1 a2 a3\na4 a5\n", t[0] + "\n" + t[1] + "\n"},
           {"page.html", "<h1>a1 a2 a3</h1><p>a4 a5</p>", "<h1>" + t[0] + "</h1><p>" + t[1] + "</p>"}}) {
    httplib::MultipartFormDataItems upload = {{"file", content, name, "text/plain"}, {"source", "en", "", ""}, {"target", "es", "", ""}};
    r = c.Post("/translate_file", upload);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string url = json::parse(r->body)["translatedFileUrl"];
    const std::string prefix = "http://127.0.0.1:" + std::to_string(lt.server->port()) + "/download_file/";
    ASSERT_EQ(url.rfind(prefix, 0), 0u) << url;
    auto got = c.Get(("/download_file/" + url.substr(prefix.size())).c_str());
    ASSERT_TRUE(got);
    EXPECT_EQ(got->status, 200);
    EXPECT_EQ(got->body, want) << name;
    EXPECT_NE(got->get_header_value("Content-Disposition").find("filename=\"" + name + "\""), std::string::npos);
  }
  httplib::MultipartFormDataItems pdf = {{"file", "x", "a.pdf", "application/pdf"}, {"source", "en", "", ""}, {"target", "es", "", ""}};
  EXPECT_EQ(error_of(c.Post("/translate_file", pdf), 400), "Invalid request: file format not supported");
  EXPECT_EQ(c.Get("/download_file/..%2F..%2Fetc%2Fpasswd")->status, 404);  // not a name: no such path
  EXPECT_EQ(c.Get("/download_file/passwd")->status, 400);
  EXPECT_EQ(c.Get("/download_file/00000000-0000-0000-0000-000000000000.x.txt")->status, 404);
  // Uploads are bounded: by parts, and by --max-request-bytes.
  httplib::MultipartFormDataItems many;
  for (int i = 0; i < 40; ++i) many.push_back({"f" + std::to_string(i), "x", "", ""});
  EXPECT_EQ(error_of(c.Post("/translate_file", many), 400), "the form has more than 32 parts");
  // (Small enough for loopback's buffers to take whole: a client still writing when the server
  // answers would get SIGPIPE or a reset instead of the answer.)
  httplib::MultipartFormDataItems big = {{"file", std::string(70000, 'a'), "big.txt", "text/plain"}, {"source", "en", "", ""}, {"target", "es", "", ""}};
  r = c.Post("/translate_file", big);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_EQ(c.Get("/health")->status, 200) << "still serving";
  EXPECT_EQ(error_of(c.Post("/suggest", "q=a&s=b&source=en&target=es", "application/x-www-form-urlencoded"), 403),
            "Suggestions are disabled on this server.");
  EXPECT_EQ(lt.server->stop(), 0) << lt.server->log();
}

// --lazy: no model is loaded until a request needs it; then it translates as one loaded at start.
TEST(ServeLibreTranslate, LazyModelsLoadAtTheirFirstRequest) {
  Lt lt("--lazy");
  ASSERT_GT(lt.server->port(), 0);
  auto& c = *lt.client;
  json health = json::parse(c.Get("/v1/health")->body);
  ASSERT_EQ(health["models"].size(), 3u);
  for (const auto& m : health["models"]) EXPECT_EQ(m["loaded"], false) << health;
  EXPECT_NE(lt.server->log().find("en-es (en->es, 1 worker, lazy)"), std::string::npos) << lt.server->log();
  const auto t = translate_lines({"a1 a2 a3"}, lt.dir);
  // Concurrent first requests: one load, every answer the same.
  std::vector<std::string> got(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      httplib::Client client("127.0.0.1", lt.server->port());
      client.set_read_timeout(60, 0);
      auto r = client.Post("/translate", json{{"q", "a1 a2 a3"}, {"source", "en"}, {"target", "es"}}.dump(), "application/json");
      if (r && r->status == 200) got[i] = json::parse(r->body)["translatedText"];
    });
  }
  for (auto& th : clients) th.join();
  for (const auto& g : got) EXPECT_EQ(g, t[0]);
  health = json::parse(c.Get("/v1/health")->body);
  EXPECT_EQ(health["models"][0]["loaded"], true) << health;
  EXPECT_EQ(health["models"][1]["loaded"], false) << health;
  const std::string log = lt.server->log();
  EXPECT_EQ(log.find("loaded model en-es"), log.rfind("loaded model en-es")) << "loaded once: " << log;
  EXPECT_NE(log.find("loaded model en-es"), std::string::npos) << log;
  EXPECT_EQ(lt.server->stop(), 0) << lt.server->log();
}

// --load-only serves the models between those languages; what cannot be served stops the start
// with one line and exit 2.
TEST(ServeLibreTranslate, LoadOnlyAndModelLanguagesAreChecked) {
  Lt lt("--load-only en,es");
  ASSERT_GT(lt.server->port(), 0);
  const json languages = json::parse(lt.client->Get("/languages")->body);
  ASSERT_EQ(languages.size(), 2u) << languages;
  EXPECT_EQ(languages[0]["code"], "en");
  EXPECT_EQ(languages[1]["code"], "es");
  EXPECT_NE(lt.server->log().find("--load-only en,es: not serving de-en (de->en)"), std::string::npos) << lt.server->log();
  EXPECT_EQ(lt.server->stop(), 0) << lt.server->log();
  std::string out;
  EXPECT_EQ(run_command(kCli + " serve --models " + lt.dir + "/models.yaml --load-only fr,it --port 0", out), 2);
  EXPECT_NE(out.find("--load-only fr,it: none of the models translates between these languages"), std::string::npos) << out;
  std::ofstream(lt.dir + "/auto.yaml") << "- name: x\n  checkpoint: " << leanseq::test::tiny_checkpoint() << "\n  source: auto\n";
  EXPECT_EQ(run_command(kCli + " serve --models " + lt.dir + "/auto.yaml --port 0", out), 2);
  EXPECT_NE(out.find("model 1: source must be a language code"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " serve --checkpoint " + leanseq::test::tiny_checkpoint() + " --lazy --shortlist x --port 0", out), 2);
  EXPECT_NE(out.find("--lazy: not with --shortlist"), std::string::npos) << out;
}
