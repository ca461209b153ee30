// Accuracy of the language identification of `leanseq serve` (serve/language_id.h: CLD2,
// restricted to the languages served) on short real sentences: Multi30k's test2016 (de, en) and
// the Bible corpus' test verses (es, en), each identified among the languages of the run, overall
// and for sentences of at most --short words, and German against Spanish alone (source "auto"
// between a de-en and an es-en model). Prints one JSON object (bench/README.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "errors.h"
#include "leanseq/core/io.h"
#include "leanseq/data/bible.h"
#include "leanseq/serve/language_id.h"

namespace {

size_t words(const std::string& s) {
  std::istringstream in(s);
  size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

struct Tally {
  int64_t lines = 0, right = 0, short_lines = 0, short_right = 0;
  nlohmann::json json() const {
    auto ratio = [](int64_t a, int64_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b); };
    return {{"lines", lines}, {"accuracy", ratio(right, lines)}, {"short_lines", short_lines},
            {"short_accuracy", ratio(short_right, short_lines)}};
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"leanseq-language-id-bench: language identification accuracy on short sentences (one JSON object)"};
  std::string multi30k = "../shared/data/multi30k", work;
  int64_t max_lines = 1000;
  size_t short_words = 6;
  app.add_option("--multi30k", multi30k, "Multi30k's directory (test2016.de, test2016.en)")->capture_default_str();
  app.add_option("--bible-dir", work, "where to build the Bible corpus (default: a private directory)");
  app.add_option("--lines", max_lines, "lines per language at most")->capture_default_str();
  app.add_option("--short", short_words, "a short sentence has at most this many words")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return leanseq::bench::run_reporting_errors("leanseq-language-id-bench", [&] {    std::unique_ptr<leanseq::io::PrivateDirectory> tmp;
    if (work.empty()) {
      tmp = std::make_unique<leanseq::io::PrivateDirectory>("leanseq-langid");
      work = tmp->path();
    }
    leanseq::data::BibleCorpusOptions bible;
    bible.out_dir = work;
    leanseq::data::build_bible_corpus(bible);
    const std::map<std::string, std::vector<std::string>> sets = {
        {"de (Multi30k)", leanseq::io::read_lines(multi30k + "/test2016.de")},
        {"en (Multi30k)", leanseq::io::read_lines(multi30k + "/test2016.en")},
        {"es (Bible)", leanseq::io::read_lines(work + "/test.es")},
        {"en (Bible)", leanseq::io::read_lines(work + "/test.en")}};
    auto evaluate = [&](const std::vector<std::string>& candidates) {
      nlohmann::json out = nlohmann::json::object();
      Tally all;
      for (const auto& [name, lines] : sets) {
        const std::string truth = name.substr(0, 2);
        if (std::find(candidates.begin(), candidates.end(), truth) == candidates.end()) continue;
        Tally t;
        for (int64_t i = 0; i < std::min<int64_t>(max_lines, static_cast<int64_t>(lines.size())); ++i) {
          const bool right = leanseq::serve::identify_language(lines[i], candidates).front().language == truth;
          const bool is_short = words(lines[i]) <= short_words;
          for (Tally* x : {&t, &all}) {
            x->lines += 1;
            x->right += right;
            x->short_lines += is_short;
            x->short_right += is_short && right;
          }
        }
        out[name] = t.json();
      }
      out["all"] = all.json();
      return out;
    };
    nlohmann::json result = {{"bench", "language_id"},
                             {"identifier", "CLD2 (libcld2)"},
                             {"short_words", short_words},
                             {"among de, en, es", evaluate({"de", "en", "es"})},
                             {"de against es", evaluate({"de", "es"})}};
    std::cout << result.dump() << std::endl;
  });
}
