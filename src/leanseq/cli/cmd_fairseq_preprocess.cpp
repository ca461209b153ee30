// `leanseq fairseq-preprocess`: fairseq-preprocess's command line for translation data (or, with
// --only-source, a language model's) that is already split into subwords: dictionaries (fairseq's counting, threshold, size limit and padding)
// and the splits binarized in fairseq's mmap format, files fairseq-train reads as well as leanseq.
#include <algorithm>
#include <filesystem>
#include <thread>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/line_reader.h"
#include "leanseq/core/logging.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/text_classification.h"  // split_words: fairseq's tokenize_line

namespace leanseq::cli {

namespace {
struct PreprocessArgs {
  std::string src, tgt, trainpref, validpref, testpref, destdir = "data-bin", srcdict, tgtdict, dataset_impl = "mmap";
  bool joined = false, only_source = false;
  int64_t nwordssrc = -1, nwordstgt = -1, thresholdsrc = 0, thresholdtgt = 0, padding_factor = 8, workers = 1;
};

// Calls fn(line) for each line of `path`, a DataError naming the file and line for invalid UTF-8.
template <typename Fn>
int64_t for_each_line(const std::string& path, Fn&& fn) {
  if (!io::file_exists(path)) throw DataError(path + ": file not found");
  io::LineReader in(path);
  std::string line;
  int64_t n = 0;
  while (in.next(line)) {
    io::check_utf8_line(path, ++n, line);
    fn(line);
  }
  return n;
}

data::Dictionary build_dictionary(const std::vector<std::string>& files, int64_t threshold, int64_t nwords,
                                  int64_t padding_factor) {
  data::Dictionary d;
  for (const auto& f : files) {
    for_each_line(f, [&](const std::string& line) {
      for (const auto& t : data::split_words(line)) d.add(t);
    });
  }
  // fairseq's nwords counts its four special symbols.
  d.finalize(threshold, nwords > 0 ? std::max<int64_t>(nwords - 4, 0) : -1, padding_factor);
  return d;
}

// One file of a split, binarized with `dict` by `workers` threads (in chunks, written in order).
void binarize(const std::string& text, const std::string& prefix, const data::Dictionary& dict, int64_t workers,
              const std::string& lang) {
  data::FairseqIndexedWriter out(prefix, dict.size());
  std::vector<std::string> chunk;
  int64_t sentences = 0, tokens = 0, unknown = 0;
  auto flush = [&] {
    std::vector<std::vector<int64_t>> ids(chunk.size());
    std::vector<std::thread> threads;
    for (int64_t w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        for (size_t i = static_cast<size_t>(w); i < chunk.size(); i += static_cast<size_t>(workers)) {
          ids[i] = dict.encode(data::split_words(chunk[i]));
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& s : ids) {
      out.add(s);
      ++sentences;
      tokens += static_cast<int64_t>(s.size());
      unknown += std::count(s.begin(), s.end(), data::Dictionary::kUnk);
    }
    chunk.clear();
  };
  for_each_line(text, [&](const std::string& line) {
    chunk.push_back(line);
    if (chunk.size() == 65536) flush();
  });
  flush();
  out.finish();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f%%", tokens > 0 ? 100.0 * static_cast<double>(unknown) / static_cast<double>(tokens) : 0.0);
  log::info("[" + lang + "] " + text + ": " + std::to_string(sentences) + " sents, " + std::to_string(tokens) + " tokens, " +
            buf + " replaced (by <unk>)");
}
const std::vector<std::pair<std::string, std::string>> splits(const PreprocessArgs& a) {
  return {{"train", a.trainpref}, {"valid", a.validpref}, {"test", a.testpref}};
}

// --only-source, as fairseq names the files: with -s xx, <prefix>.xx into <split>.xx-None.xx
// (fairseq's name for a missing target) and dict.xx.txt; without, <prefix> into <split> and dict.txt.
void preprocess_source_only(const PreprocessArgs& a) {
  if (!a.tgt.empty() || !a.tgtdict.empty() || a.joined) {
    throw ConfigError("fairseq-preprocess: --only-source takes no --target-lang, --tgtdict or --joined-dictionary");
  }
  if (a.trainpref.empty() && a.srcdict.empty()) throw ConfigError("fairseq-preprocess: give --trainpref or --srcdict");
  const std::string suffix = a.src.empty() ? "" : "." + a.src;
  io::make_dirs(a.destdir);
  const auto dict = !a.srcdict.empty() ? data::Dictionary::load(a.srcdict)
                                       : build_dictionary({a.trainpref + suffix}, a.thresholdsrc, a.nwordssrc, a.padding_factor);
  dict.save(a.destdir + (a.src.empty() ? "/dict.txt" : "/dict." + a.src + ".txt"));
  for (const auto& [split, prefix] : splits(a)) {
    if (prefix.empty()) continue;
    binarize(prefix + suffix, a.destdir + "/" + split + (a.src.empty() ? "" : suffix + "-None" + suffix), dict, a.workers,
             a.src.empty() ? "text" : a.src);
  }
  log::info("wrote preprocessed data to " + a.destdir);
}
}  // namespace

void add_fairseq_preprocess(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<PreprocessArgs>();
  auto* sub = app.add_subcommand(
      "fairseq-preprocess",
      "fairseq-preprocess's command line: dictionaries and fairseq's binarized splits of subword text, which "
      "fairseq-train and leanseq train both read (docs/fairseq.md)");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("--source-lang,-s", a->src, "source language (with --only-source: optional)");
  sub->add_option("--target-lang,-t", a->tgt, "target language");
  sub->add_flag("--only-source", a->only_source,
                "one side only, a language model's data: without -s, <prefix> itself into <split>.bin/.idx and dict.txt");
  sub->add_option("--trainpref", a->trainpref, "train file prefix (<prefix>.<lang>, subword text)");
  sub->add_option("--validpref", a->validpref, "valid file prefix");
  sub->add_option("--testpref", a->testpref, "test file prefix");
  sub->add_option("--destdir", a->destdir, "output directory")->capture_default_str();
  sub->add_option("--srcdict", a->srcdict, "reuse this source dictionary");
  sub->add_option("--tgtdict", a->tgtdict, "reuse this target dictionary");
  sub->add_flag("--joined-dictionary", a->joined, "one dictionary for both languages");
  sub->add_option("--nwordssrc", a->nwordssrc, "source dictionary size at most, special symbols included (-1: all)")
      ->capture_default_str();
  sub->add_option("--nwordstgt", a->nwordstgt, "target dictionary size at most (-1: all)")->capture_default_str();
  sub->add_option("--thresholdsrc", a->thresholdsrc, "source words seen fewer times map to <unk>")->capture_default_str();
  sub->add_option("--thresholdtgt", a->thresholdtgt, "target words seen fewer times map to <unk>")->capture_default_str();
  sub->add_option("--padding-factor", a->padding_factor, "pad dictionaries to a multiple of this")->capture_default_str();
  sub->add_option("--workers", a->workers, "threads that binarize")->capture_default_str()->check(CLI::Range(1, 256));
  sub->add_option("--dataset-impl", a->dataset_impl, "mmap (fairseq's default, the only one written; lazy and cached are read)")
      ->check(CLI::IsMember({"mmap"}));
  sub->callback([a, &exit_code] {
    if (a->only_source) {
      preprocess_source_only(*a);
      exit_code = 0;
      return;
    }
    if (a->src.empty() || a->tgt.empty()) {
      throw ConfigError("fairseq-preprocess: give --source-lang and --target-lang (or --only-source)");
    }
    if (a->trainpref.empty() && (a->srcdict.empty() || a->tgtdict.empty())) {
      throw ConfigError("fairseq-preprocess: give --trainpref, or both --srcdict and --tgtdict");
    }
    for (const auto* p : {&a->trainpref, &a->validpref, &a->testpref}) {
      if (p->find(',') != std::string::npos) {
        throw ConfigError("fairseq-preprocess: several prefixes in one flag ('" + *p + "') are not supported");
      }
    }
    if (a->joined && (!a->tgtdict.empty() || (a->srcdict.empty() && a->trainpref.empty()))) {
      throw ConfigError("fairseq-preprocess: --joined-dictionary builds one dictionary (or takes --srcdict), not --tgtdict");
    }
    io::make_dirs(a->destdir);
    auto train_file = [&](const std::string& lang) { return a->trainpref + "." + lang; };
    data::Dictionary src_dict, tgt_dict;
    if (a->joined) {
      src_dict = !a->srcdict.empty() ? data::Dictionary::load(a->srcdict)
                                     : build_dictionary({train_file(a->src), train_file(a->tgt)}, a->thresholdsrc,
                                                        a->nwordssrc, a->padding_factor);
      tgt_dict = src_dict;
    } else {
      src_dict = !a->srcdict.empty() ? data::Dictionary::load(a->srcdict)
                                     : build_dictionary({train_file(a->src)}, a->thresholdsrc, a->nwordssrc, a->padding_factor);
      tgt_dict = !a->tgtdict.empty() ? data::Dictionary::load(a->tgtdict)
                                     : build_dictionary({train_file(a->tgt)}, a->thresholdtgt, a->nwordstgt, a->padding_factor);
    }
    src_dict.save(a->destdir + "/dict." + a->src + ".txt");
    tgt_dict.save(a->destdir + "/dict." + a->tgt + ".txt");
    for (const auto& [split, prefix] : splits(*a)) {
      if (prefix.empty()) continue;
      for (const auto& [lang, dict] : {std::pair<std::string, const data::Dictionary*>{a->src, &src_dict}, {a->tgt, &tgt_dict}}) {
        binarize(prefix + "." + lang, a->destdir + "/" + split + "." + a->src + "-" + a->tgt + "." + lang, *dict,
                 a->workers, lang);
      }
    }
    log::info("wrote preprocessed data to " + a->destdir);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
