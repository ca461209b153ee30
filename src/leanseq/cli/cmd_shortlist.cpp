// `leanseq shortlist`: a vocabulary shortlist (CTranslate2's vmap format) from a parallel corpus,
// in a checkpoint's subwords: for each source subword its most likely target subwords, and the
// most frequent target subwords, always allowed.
#include <fstream>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/line_reader.h"
#include "leanseq/core/logging.h"
#include "leanseq/data/lexical_table.h"
#include "leanseq/runtime/inference.h"

namespace leanseq::cli {

namespace {
struct ShortlistArgs {
  std::string checkpoint, src, tgt, out;
  int64_t best = 50, frequent = 500, iterations = 5, max_sentences = 1000000;
  data::LexicalMethod method = data::LexicalMethod::ibm1;
};

std::vector<int32_t> narrow(const std::vector<int64_t>& ids) { return {ids.begin(), ids.end()}; }
}  // namespace

void add_shortlist(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ShortlistArgs>();
  auto* sub = app.add_subcommand("shortlist",
                                 "a vocabulary shortlist for translate --shortlist from a parallel corpus (CTranslate2's "
                                 "vmap format): each source subword's most likely target subwords, and the most frequent");
  sub->add_option("--checkpoint", a->checkpoint, "the model whose subwords and dictionaries the shortlist is for")->required();
  sub->add_option("--src", a->src, "source side of the corpus, one sentence per line (raw text)")->required();
  sub->add_option("--tgt", a->tgt, "target side, line by line with --src")->required();
  sub->add_option("--output,--out,-o", a->out, "the shortlist file")->required();
  sub->add_option("--best", a->best, "target subwords kept per source subword")->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  sub->add_option("--frequent", a->frequent, "most frequent target subwords, always allowed")->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  sub->add_option("--method", a->method, "ibm1 (IBM model 1, EM) or cooccurrence (p(t|s) from sentence co-occurrence)")
      ->transform(CLI::CheckedTransformer(std::map<std::string, data::LexicalMethod>{
          {"ibm1", data::LexicalMethod::ibm1}, {"cooccurrence", data::LexicalMethod::cooccurrence}}))
      ->default_str("ibm1");
  sub->add_option("--iterations", a->iterations, "EM iterations of ibm1")->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100}));
  sub->add_option("--max-sentences", a->max_sentences, "read at most this many pairs (memory grows with them)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  sub->callback([a, &exit_code] {
    auto lt = runtime::load_translator(a->checkpoint);
    const auto& tr = *lt.translator;
    io::LineReader src(a->src), tgt(a->tgt);
    std::vector<std::vector<int32_t>> sources, targets;
    std::string s, t;
    while (static_cast<int64_t>(sources.size()) < a->max_sentences && src.next(s)) {
      if (!tgt.next(t)) throw DataError(a->tgt + ": has " + std::to_string(sources.size()) + " lines, fewer than " + a->src);
      sources.push_back(narrow(tr.src_dict().encode(tr.source_pieces(s), false)));
      targets.push_back(narrow(tr.tgt_dict().encode(tr.tgt_text().encode(t), false)));
    }
    if (static_cast<int64_t>(sources.size()) < a->max_sentences && tgt.next(t)) {
      throw DataError(a->tgt + ": has more lines than " + a->src + " (" + std::to_string(sources.size()) + ")");
    }
    const auto table = data::build_lexical_table(sources, targets, tr.src_dict().size(), tr.tgt_dict().size(), a->method,
                                                 a->best, a->frequent, a->iterations);
    int64_t entries = 0;
    io::atomic_write(a->out, [&](const std::string& tmp) {
      std::ofstream f(tmp, std::ios::binary);
      if (!f) throw DataError(a->out + ": cannot write");
      for (size_t k = 0; k < table.frequent.size(); ++k) f << (k ? " " : "\t") << tr.tgt_dict().symbol(table.frequent[k]);
      f << "\n";
      for (size_t id = 0; id < table.best.size(); ++id) {
        if (table.best[id].empty()) continue;
        ++entries;
        f << tr.src_dict().symbol(static_cast<int64_t>(id));
        for (size_t k = 0; k < table.best[id].size(); ++k) f << (k ? " " : "\t") << tr.tgt_dict().symbol(table.best[id][k].first);
        f << "\n";
      }
      if (!f) throw DataError(a->out + ": write failed");
    });
    log::info("wrote " + a->out + ": " + std::to_string(entries) + " source subwords with up to " + std::to_string(a->best) +
              " target subwords each, " + std::to_string(table.frequent.size()) + " always allowed, from " +
              std::to_string(sources.size()) + " sentence pairs");
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
