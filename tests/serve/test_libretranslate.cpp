// LibreTranslate's API apart from HTTP (serve/libretranslate.h): sentences split and joined with
// their layout, HTML's text translated with its markup kept byte for byte, language
// identification restricted to what is served, LibreTranslate's fields, limits and error texts,
// and the store of translated files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <thread>

#include "leanseq/serve/file_store.h"
#include "leanseq/serve/html.h"
#include "leanseq/serve/language_id.h"
#include "leanseq/serve/libretranslate.h"
#include "leanseq/serve/request.h"
#include "leanseq/serve/segments.h"

using json = nlohmann::json;
using namespace leanseq::serve;

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A "model" that writes each sentence in capitals, its n-th best with " #n" after it; it records
// the sentences and options it was given.
struct FakeModels {
  std::vector<std::vector<std::string>> calls;
  std::vector<int64_t> beams;
  std::vector<size_t> models;
  SentenceTranslator translator() {
    return [this](size_t model, const std::vector<std::string>& sentences, const leanseq::decode::TranslateOptions& o) {
      calls.push_back(sentences);
      beams.push_back(o.search.beam);
      models.push_back(model);
      std::vector<std::vector<std::string>> out;
      for (const auto& s : sentences) {
        std::vector<std::string> nbest{upper(s)};
        for (int64_t k = 1; k < o.search.nbest; ++k) nbest.push_back(upper(s) + " #" + std::to_string(k + 1));
        out.push_back(nbest);
      }
      return out;
    };
  }
};

const std::vector<ModelInfo> kPairs = {{"de-en", "de", "en"}, {"es-en", "es", "en"}, {"en-es", "en", "es"}};

template <typename F>
Refusal refusal_of(F&& f) {
  try {
    f();
  } catch (const Refusal& r) {
    return r;
  }
  ADD_FAILURE() << "no refusal";
  return Refusal{0, ""};
}

}  // namespace

TEST(Sentences, SplitWithTheirLayoutKept) {
  const std::string text = "Mr. Smith went home.  He slept!\nNext line here\n\n  And this one? Yes.\n";
  const Segments s = sentences_of(text, "en");
  EXPECT_EQ(s.parts, (std::vector<std::string>{"Mr. Smith went home.", "He slept!", "Next line here", "And this one?", "Yes."}));
  EXPECT_EQ(s.join(s.parts), text);
  std::vector<std::string> up;
  for (const auto& p : s.parts) up.push_back(upper(p));
  EXPECT_EQ(s.join(up), "MR. SMITH WENT HOME.  HE SLEPT!\nNEXT LINE HERE\n\n  AND THIS ONE? YES.\n");
  EXPECT_TRUE(sentences_of(" \n\t ", "en").parts.empty());
  EXPECT_EQ(sentences_of(" \n\t ", "en").join({}), " \n\t ");
  // A paragraph of 40 sentences, about 5 000 characters: 40 parts, joined back as it was.
  std::string paragraph;
  for (int i = 0; i < 40; ++i) {
    paragraph += "Sentence number " + std::to_string(i) + " talks about a long journey across the mountains, "
                 "through the valleys and over many rivers, until it reaches the sea" + (i % 7 == 6 ? ".\n" : ". ");
  }
  EXPECT_GT(paragraph.size(), 4800u);
  const Segments p = sentences_of(paragraph, "en");
  EXPECT_EQ(p.parts.size(), 40u);
  EXPECT_EQ(p.join(p.parts), paragraph);
  EXPECT_EQ(code_points("Straße ✓"), 8u);
}

TEST(Html, TextBetweenTagsIsTranslatedAndMarkupKept) {
  const std::string html =
      "<p class=\"x\">Hello &amp; welcome.</p>\n<script>var a = \"no\";</script><code>keep me</code>"
      "<p translate=\"no\">Not this</p><span class=\"a notranslate\">Nor this</span><!-- a comment -->"
      "<b>Bold</b> text &lt;here&gt;<pre> pre </pre><br/>";
  const HtmlText doc(html);
  EXPECT_EQ(doc.parts(), (std::vector<std::string>{"Hello & welcome.", "Bold", "text <here>"}));
  std::vector<std::string> up;
  for (const auto& p : doc.parts()) up.push_back(upper(p));
  EXPECT_EQ(doc.join(up),
            "<p class=\"x\">HELLO &amp; WELCOME.</p>\n<script>var a = \"no\";</script><code>keep me</code>"
            "<p translate=\"no\">Not this</p><span class=\"a notranslate\">Nor this</span><!-- a comment -->"
            "<b>BOLD</b> TEXT &lt;HERE&gt;<pre> pre </pre><br/>");
  EXPECT_EQ(doc.join(doc.parts()), "<p class=\"x\">Hello &amp; welcome.</p>\n<script>var a = \"no\";</script><code>keep me</code>"
                                   "<p translate=\"no\">Not this</p><span class=\"a notranslate\">Nor this</span><!-- a comment -->"
                                   "<b>Bold</b> text &lt;here&gt;<pre> pre </pre><br/>");
  // A whole document, unclosed tags, text only.
  EXPECT_EQ(HtmlText("<!DOCTYPE html><html><head><title>T</title></head><body><p>One<p>Two</body></html>").parts(),
            (std::vector<std::string>{"T", "One", "Two"}));
  EXPECT_EQ(HtmlText("just text").join({"JUST TEXT"}), "JUST TEXT");
  EXPECT_TRUE(HtmlText("").parts().empty());
  // Nesting past the bound is refused before it is parsed.
  std::string deep;
  for (size_t i = 0; i <= kMaxHtmlTags; ++i) deep += "<b>";
  EXPECT_EQ(refusal_of([&] { HtmlText{deep}; }).status, 400);
  std::string ok_deep;
  for (size_t i = 0; i < 5000; ++i) ok_deep += "<i>";
  EXPECT_EQ(HtmlText(ok_deep + "x").parts(), std::vector<std::string>{"x"});
}

TEST(LanguageId, ShortSentencesAmongTheLanguagesServed) {
  const std::vector<std::string> de_es{"de", "es"};
  EXPECT_EQ(identify_language("Ein Mann fährt mit dem Fahrrad durch die Stadt.", de_es)[0].language, "de");
  EXPECT_EQ(identify_language("Un hombre monta en bicicleta por la ciudad.", de_es)[0].language, "es");
  EXPECT_GT(identify_language("Un hombre monta en bicicleta por la ciudad.", de_es)[0].confidence, 50);
  // Another language than those served, or nothing to go by: the first served, confidence 0.
  const auto none = identify_language("12345 !!!", de_es);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].language, "de");
  EXPECT_EQ(none[0].confidence, 0);
  EXPECT_FALSE(identify_language("Hello", {"en", "es"}).empty());
  EXPECT_EQ(identify_language(std::string(100000, 'a') + " the house is big", {"en"}).size(), 1u);
  // Control characters (found by fuzz_http: CLD2 left its answer unset) read as spaces.
  EXPECT_EQ(identify_language(std::string("Un hombre\x16\0 monta en bicicleta por la ciudad.", 45), de_es)[0].language, "es");
}

TEST(LibreTranslateApi, TranslatesAsLibreTranslateAnswers) {
  FakeModels fake;
  leanseq::decode::TranslateOptions defaults;
  defaults.search.beam = 2;
  LibreTranslate api(kPairs, {}, defaults, 16, 8, 100, fake.translator());
  // One text, split into sentences and joined back.
  json out = api.translate({{"q", "Hola amigo. ¿Qué tal?\nBien."}, {"source", "es"}, {"target", "en"}}, true);
  EXPECT_EQ(out, json({{"translatedText", "HOLA AMIGO. ¿QUé TAL?\nBIEN."}}));
  EXPECT_EQ(fake.calls.back(), (std::vector<std::string>{"Hola amigo.", "¿Qué tal?", "Bien."}));
  EXPECT_EQ(fake.models.back(), 1u);
  // A list; a form's text with "\r\n"; alternatives from the n-best, distinct.
  out = api.translate({{"q", {"One. Two.", "c"}}, {"source", "en"}, {"target", "es"}, {"alternatives", 2}}, true);
  EXPECT_EQ(out["translatedText"], json({"ONE. TWO.", "C"}));
  EXPECT_EQ(out["alternatives"], json::parse(R"([["ONE. #2 TWO. #2", "ONE. #3 TWO. #3"], ["C #2", "C #3"]])"));
  EXPECT_EQ(fake.beams.back(), 3);  // the beam widened to the n-best
  out = api.translate({{"q", "x\r\ny"}, {"source", "en"}, {"target", "es"}, {"alternatives", "1"}}, false);
  EXPECT_EQ(out["translatedText"], "X\nY");
  EXPECT_EQ(out["alternatives"], json({"X #2\nY #2"}));
  // source auto: German or Spanish into English, with the language found.
  out = api.translate({{"q", "Ein Mann fährt mit dem Fahrrad durch die Stadt."}, {"source", "auto"}, {"target", "en"}}, true);
  EXPECT_EQ(out["detectedLanguage"]["language"], "de") << out;
  EXPECT_EQ(fake.models.back(), 0u);
  out = api.translate({{"q", {"Un hombre monta en bicicleta por la ciudad."}}, {"source", "auto"}, {"target", "en"}}, true);
  EXPECT_EQ(out["detectedLanguage"][0]["language"], "es") << out;
  EXPECT_EQ(fake.models.back(), 1u);
  // HTML: the text translated, the markup kept.
  out = api.translate({{"q", "<p>Hello <b>world</b>. <code>x = 1</code></p>"}, {"source", "en"}, {"target", "es"}, {"format", "html"}}, true);
  EXPECT_EQ(out["translatedText"], "<p>HELLO <b>WORLD</b>. <code>x = 1</code></p>");
  // Decoding options go through the option table.
  api.translate({{"q", "x"}, {"source", "en"}, {"target", "es"}, {"beam", "5"}}, false);
  EXPECT_EQ(fake.beams.back(), 5);

  // LibreTranslate's refusals, word for word.
  auto message = [&](const json& fields) {
    const Refusal r = refusal_of([&] { api.translate(fields, true); });
    EXPECT_EQ(r.status, 400) << fields;
    return r.message;
  };
  EXPECT_EQ(message({{"source", "en"}, {"target", "es"}}), "Invalid request: missing q parameter");
  EXPECT_EQ(message({{"q", ""}, {"source", "en"}, {"target", "es"}}), "Invalid request: missing q parameter");
  EXPECT_EQ(message({{"q", "x"}, {"target", "es"}}), "Invalid request: missing source parameter");
  EXPECT_EQ(message({{"q", "x"}, {"source", "en"}}), "Invalid request: missing target parameter");
  EXPECT_EQ(message({{"q", "x"}, {"source", "en"}, {"target", "zz"}}), "zz is not supported");
  EXPECT_EQ(message({{"q", "x"}, {"source", "zz"}, {"target", "es"}}), "zz is not supported");
  EXPECT_EQ(message({{"q", "x"}, {"source", "de"}, {"target", "es"}}),
            "Spanish (es) is not available as a target language from German (de)");
  EXPECT_EQ(message({{"q", "x"}, {"source", "en"}, {"target", "es"}, {"format", "pdf"}}), "pdf format is not supported");
  EXPECT_EQ(message({{"q", "x"}, {"source", "en"}, {"target", "es"}, {"alternatives", "two"}}),
            "Invalid request: alternatives parameter is not a number");
  EXPECT_EQ(message({{"q", "x"}, {"source", "en"}, {"target", "es"}, {"alternatives", 16}}),
            "Invalid request: alternatives parameter must be <= 15");
  EXPECT_EQ(message({{"q", "x"}, {"source", "en"}, {"target", "es"}, {"beam", 0}}),
            "beam: expected an integer in [1, 1024], got 0");
  EXPECT_EQ(refusal_of([&] { api.translate(json::array(), true); }).message, "Invalid JSON format");
  EXPECT_EQ(refusal_of([&] { api.translate({{"q", std::vector<std::string>(9, "x")}, {"source", "en"}, {"target", "es"}}, true); }).status, 413);

  // Its limits.
  LibreTranslateOptions limits;
  limits.char_limit = 10;
  limits.batch_limit = 2;
  limits.alternatives_limit = 1;
  LibreTranslate limited(kPairs, limits, defaults, 16, 8, 5, fake.translator());
  auto limited_message = [&](const json& fields) { return refusal_of([&] { limited.translate(fields, true); }).message; };
  EXPECT_EQ(limited_message({{"q", "ñññññññññññ"}, {"source", "en"}, {"target", "es"}}),
            "Invalid request: request (11) exceeds text limit (10)");
  EXPECT_EQ(limited_message({{"q", {"a", "b", "c"}}, {"source", "en"}, {"target", "es"}}),
            "Invalid request: request (3) exceeds text limit (2)");
  EXPECT_EQ(limited_message({{"q", "a"}, {"source", "en"}, {"target", "es"}, {"alternatives", 2}}),
            "Invalid request: alternatives parameter must be <= 1");
  LibreTranslate five_sentences(kPairs, {}, defaults, 16, 8, 5, fake.translator());
  EXPECT_EQ(refusal_of([&] { five_sentences.translate({{"q", "One. Two. Three. Four. Five. Six."}, {"source", "en"}, {"target", "es"}}, true); }).status, 413);
  EXPECT_EQ(limited.translate({{"q", "ññññññññññ"}, {"source", "en"}, {"target", "es"}}, true)["translatedText"], "ññññññññññ");
  // An API key's own limit replaces the server's, either way.
  EXPECT_EQ(limited.translate({{"q", "ñññññññññññ"}, {"source", "en"}, {"target", "es"}}, true, 11)["translatedText"], "ñññññññññññ");  // (capitals of ASCII only)
  EXPECT_EQ(refusal_of([&] { api.translate({{"q", "abc"}, {"source", "en"}, {"target", "es"}}, true, 2); }).message,
            "Invalid request: request (3) exceeds text limit (2)");
}

TEST(LibreTranslateApi, DetectsFilesAndSettings) {
  FakeModels fake;
  LibreTranslate api(kPairs, {}, {}, 16, 8, 100, fake.translator());
  json d = api.detect({{"q", "Un hombre monta en bicicleta por la ciudad."}});
  ASSERT_GE(d.size(), 1u);
  EXPECT_EQ(d[0]["language"], "es");
  EXPECT_GT(d[0]["confidence"].get<double>(), 50);
  EXPECT_EQ(refusal_of([&] { api.detect(json::object()); }).message, "Invalid request: missing q parameter");
  EXPECT_EQ(api.translate_file("notes.TXT", "One. Two.\nThree.", {{"source", "en"}, {"target", "es"}}), "ONE. TWO.\nTHREE.");
  EXPECT_EQ(api.translate_file("page.html", "<h1>Title</h1><p>Text.</p>", {{"source", "en"}, {"target", "es"}}),
            "<h1>TITLE</h1><p>TEXT.</p>");
  EXPECT_EQ(refusal_of([&] { api.translate_file("a.pdf", "x", {{"source", "en"}, {"target", "es"}}); }).message,
            "Invalid request: file format not supported");
  EXPECT_EQ(refusal_of([&] { api.translate_file("a.txt", "", {{"source", "en"}, {"target", "es"}}); }).message,
            "Invalid request: empty file");
  EXPECT_EQ(refusal_of([&] { api.translate_file("a.txt", "\xff", {{"source", "en"}, {"target", "es"}}); }).status, 400);
  const json s = api.frontend_settings(false);
  EXPECT_EQ(s["charLimit"], -1);
  EXPECT_EQ(s["filesTranslation"], true);
  EXPECT_EQ(s["language"]["source"]["code"], "de");
  EXPECT_EQ(s["language"]["target"]["name"], "English");
}

TEST(FileStore, KeepsWhatItGaveOutWithinItsBytes) {
  FileStore store(20, 3600);
  const std::string a = store.put("../../etc/passwd", "0123456789");
  EXPECT_EQ(a.substr(36), ".passwd");
  EXPECT_EQ(store.get(a), (std::pair<std::string, std::string>{"0123456789", "passwd"}));
  const std::string b = store.put("b.txt", "abcdefghij");
  const std::string c = store.put("c.txt", "ABCDEFGHIJ");  // over 20 bytes: the oldest goes
  EXPECT_EQ(store.bytes(), 20u);
  EXPECT_EQ(refusal_of([&] { store.get(a); }).status, 404);
  EXPECT_EQ(store.get(c).first, "ABCDEFGHIJ");
  EXPECT_EQ(refusal_of([&] { store.get("../" + b); }).message, "Invalid filename");
  EXPECT_EQ(refusal_of([&] { store.get("x.txt"); }).message, "Invalid filename");
  EXPECT_EQ(refusal_of([&] { store.put("big", std::string(21, 'x')); }).status, 413);
  EXPECT_EQ(safe_filename("...\xc3\xa9 t.txt"), "___t.txt");
  FileStore brief(100, 0.05);
  const std::string d = brief.put("d.txt", "x");
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_EQ(refusal_of([&] { brief.get(d); }).status, 404);
  EXPECT_EQ(brief.bytes(), 0u);
}
