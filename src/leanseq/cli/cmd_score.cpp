#include <cstdio>
#include <iostream>
#include <leanseq/metrics.h>
#include <nlohmann/json.hpp>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/eval/bleu.h"
#include "leanseq/eval/fairseq_bleu.h"
#include "leanseq/eval/unicode.h"

namespace leanseq::cli {

namespace {
struct ScoreArgs {
  std::vector<std::string> refs;
  std::string hyp, format = "text";
  ScoreOptions score;
};

// DataError unless the lines of `a` and `b`, read from the paths named ("-": standard input), are
// as many.
void check_same_length(const std::vector<std::string>& a, const std::string& a_path, const std::vector<std::string>& b,
                       const std::string& b_path) {
  if (a.size() == b.size()) return;
  auto name = [](const std::string& path) { return path == "-" ? std::string("<stdin>") : path; };
  throw DataError(name(a_path) + " has " + std::to_string(a.size()) + " lines but " + name(b_path) + " has " +
                  std::to_string(b.size()));
}
}  // namespace

void add_score(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ScoreArgs>();
  auto* sub = app.add_subcommand("score", "BLEU, chrF, chrF++ and TER as sacreBLEU 2.x, or fairseq's tokenized BLEU");
  sub->add_option("--ref,-r", a->refs, "reference file (repeat for several references)")->required();
  sub->add_option("--hyp", a->hyp, "hypothesis file ('-': stdin)")->required();
  sub->add_option("--metric,-m", a->score.metric, "bleu, chrf, chrf++, ter or tok-bleu (fairseq-style: whitespace tokens)")
      ->capture_default_str();
  sub->add_option("--tokenize", a->score.tokenize, "13a, intl, char or none (BLEU)")->capture_default_str();
  sub->add_flag("--lowercase", a->score.lowercase,
                "lowercase hypotheses and references (BLEU and chrF; TER ignores case unless --case-sensitive)");
  sub->add_flag("--case-sensitive", a->score.case_sensitive, "TER: tell capitals apart (sacreBLEU's --ter-case-sensitive)");
  sub->add_option("--format", a->format, "text or json")->capture_default_str();
  sub->callback([a, &exit_code] {
    if (a->format != "text" && a->format != "json") throw ConfigError("--format must be text or json");
    auto hyps = io::read_lines(a->hyp);
    std::vector<std::vector<std::string>> refs;
    for (const auto& r : a->refs) {
      refs.push_back(io::read_lines(r));
      check_same_length(refs.back(), r, hyps, a->hyp);
    }
    const auto score = score_corpus(hyps, refs, a->score);
    std::cout << (a->format == "json" ? score.json : score.text) << "\n";
    exit_code = 0;
  });
}

namespace {
// A string as Python's repr() writes it (fairseq-score prints its arguments so).
std::string python_repr(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == '\\' || c == quote) out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out + quote;
}
}  // namespace

void add_fairseq_score(CLI::App& app, int& exit_code) {
  struct Args {
    std::string sys = "-", ref;
    int order = 4;
    bool ignore_case = false, sacrebleu = false, sentence_bleu = false;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("fairseq-score",
                                 "fairseq-score's command line: BLEU of tokenized text as fairseq's scorer computes it "
                                 "(its lines; docs/fairseq.md)");
  sub->add_option("-s,--sys", a->sys, "system output ('-': standard input)")->capture_default_str();
  sub->add_option("-r,--ref", a->ref, "references")->required();
  sub->add_option("-o,--order", a->order, "consider n-grams up to this order (1 to 4)")->capture_default_str();
  sub->add_flag("--ignore-case", a->ignore_case, "case-insensitive scoring");
  sub->add_flag("--sacrebleu", a->sacrebleu, "score with sacreBLEU's BLEU (leanseq score's) instead");
  sub->add_flag("--sentence-bleu", a->sentence_bleu, "one BLEU per sentence, with +1 smoothing of 2- to 4-grams");
  sub->callback([a, &exit_code] {
    if (a->order < 1 || a->order > 4) throw ConfigError("--order: expected 1 to 4, got " + std::to_string(a->order));
    if (a->sacrebleu && a->sentence_bleu) throw ConfigError("--sacrebleu and --sentence-bleu: give one of them");
    auto hyps = io::read_lines(a->sys), refs = io::read_lines(a->ref);
    check_same_length(hyps, a->sys, refs, a->ref);  // (fairseq stops at the shorter one, without a word)
    if (hyps.empty()) throw DataError((a->sys == "-" ? "<stdin>" : a->sys) + ": no lines to score");
    std::cout << "Namespace(sys=" << python_repr(a->sys) << ", ref=" << python_repr(a->ref) << ", order=" << a->order
              << ", ignore_case=" << (a->ignore_case ? "True" : "False") << ", sacrebleu=" << (a->sacrebleu ? "True" : "False")
              << ", sentence_bleu=" << (a->sentence_bleu ? "True" : "False") << ")\n";
    if (a->sacrebleu) {
      eval::BleuOptions o;
      o.lowercase = a->ignore_case;
      std::cout << eval::corpus_bleu(hyps, {refs}, o).format() << "\n";
      exit_code = 0;
      return;
    }
    auto words = [&](const std::string& line) { return eval::split_whitespace(a->ignore_case ? eval::to_lower(line) : line); };
    eval::FairseqBleu corpus;
    for (size_t i = 0; i < hyps.size(); ++i) {
      if (!a->sentence_bleu) {
        corpus.add(words(refs[i]), words(hyps[i]));
        continue;
      }
      eval::FairseqBleu sentence(/*one_init=*/true);
      sentence.add(words(refs[i]), words(hyps[i]));
      std::cout << i << " " << sentence.result_string(a->order) << "\n";
    }
    if (!a->sentence_bleu) std::cout << corpus.result_string(a->order) << "\n";
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
