// tokenize: the Moses tokenizer (and subword-nmt BPE) or detokenizer as a line filter, like
// sacremoses' and subword-nmt's own commands: standard input to standard output, one line out per
// line in, each written as soon as it is read.
#include <iostream>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/text/bpe.h"
#include "leanseq/text/moses.h"

namespace leanseq::cli {

namespace {
struct TokenizeArgs {
  text::MosesOptions moses;
  bool no_escape = false, detokenize = false;
  std::string bpe_codes;
  std::vector<std::string> glossaries;
};
}  // namespace

void add_tokenize(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<TokenizeArgs>();
  auto* sub = app.add_subcommand(
      "tokenize", "Moses tokenization (then subword-nmt BPE with --bpe-codes), or with --detokenize the way back; "
                  "standard input to standard output, line by line");
  sub->add_option("--lang,-l", a->moses.lang,
                  "language (built-in nonbreaking prefixes: cs, de, en, es, fr, it, pt, ro, ru; apostrophe rules: en, fr, it)")
      ->required();
  sub->add_flag("--no-escape", a->no_escape, "leave & | < > ' \" [ ] as they are (tokenizing)");
  sub->add_flag("--aggressive-dash-splits", a->moses.aggressive_dash_splits, "split hyphens inside words: a @-@ b");
  sub->add_option("--nonbreaking-prefixes", a->moses.nonbreaking_prefixes,
                  "a Moses nonbreaking_prefix file instead of the built-in list of the language");
  sub->add_flag("--detokenize,-d", a->detokenize,
                "tokens to text: joins '@@ ' first when --bpe-codes is given, unescapes, detokenizes");
  sub->add_option("--bpe-codes", a->bpe_codes, "subword-nmt codes: apply BPE after tokenizing");
  sub->add_option("--glossaries", a->glossaries, "words (regular expressions) BPE never splits")->expected(1, -1);
  sub->callback([a, &exit_code] {
    a->moses.escape = !a->no_escape;
    std::unique_ptr<text::Bpe> bpe;
    if (!a->bpe_codes.empty()) bpe = std::make_unique<text::Bpe>(text::Bpe::from_file(a->bpe_codes, a->glossaries));
    if (!a->glossaries.empty() && !bpe) throw ConfigError("--glossaries needs --bpe-codes");
    std::unique_ptr<text::MosesTokenizer> tok;
    std::unique_ptr<text::MosesDetokenizer> detok;
    if (a->detokenize) {
      detok = std::make_unique<text::MosesDetokenizer>(a->moses.lang, !a->no_escape);
    } else {
      tok = std::make_unique<text::MosesTokenizer>(a->moses);
    }
    std::string line;
    for (int64_t n = 1; std::getline(std::cin, line); ++n) {
      if (io::utf8_invalid_offset(line) >= 0) {
        std::cerr << "leanseq: <stdin>:" << n << ": invalid UTF-8, an empty line written\n";
        std::cout << "\n" << std::flush;
        continue;
      }
      if (detok) {
        std::cout << detok->detokenize(bpe ? bpe->remove(line) : line) << "\n" << std::flush;
      } else {
        const std::string t = tok->tokenize(line);
        std::cout << (bpe ? bpe->apply_line(t) : t) << "\n" << std::flush;
      }
    }
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
