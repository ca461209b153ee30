#include "leanseq/data/prepare.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/progress.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/prepare_passes.h"
#include "leanseq/data/spm.h"

namespace fs = std::filesystem;

namespace leanseq::data {

// meta.yaml is a few lines; a larger one is not one prepare wrote.
constexpr uint64_t kMaxMetaBytes = uint64_t{1} << 20;

std::string PrepareReport::format() const {
  std::ostringstream os;
  if (language_model) {
    os << "vocabulary: " << tgt_vocab << " symbols\n";
    for (const auto& s : splits) {
      os << s.name << ": " << s.kept << " of " << s.lines << " sentences kept";
      if (s.duplicates > 0) os << " (" << s.duplicates << " duplicates)";
      os << ", " << s.tgt_tokens << " tokens, unk " << s.tgt_unk << "\n";
    }
    if (!shards.empty()) os << "train: " << shards.size() << " shards of at most " << shard_size << " sentences\n";
    return os.str();
  }
  os << "vocabulary: src " << src_vocab << " / tgt " << tgt_vocab << " symbols\n";
  for (const auto& s : splits) {
    os << s.name << ": " << s.kept << " of " << s.lines << " pairs kept";
    if (s.duplicates > 0) os << " (" << s.duplicates << " duplicates";
    if (s.kept + s.duplicates != s.lines) {
      os << (s.duplicates > 0 ? ", " : " (") << (s.lines - s.kept - s.duplicates) << " filtered by length/ratio";
    }
    if (s.kept != s.lines) os << ")";
    os << ", " << s.src_tokens << " src / " << s.tgt_tokens << " tgt tokens, unk "
       << s.src_unk << " / " << s.tgt_unk << "\n";
  }
  if (!shards.empty()) os << "train: " << shards.size() << " shards of at most " << shard_size << " pairs\n";
  return os.str();
}

namespace {
void check_prepare_options(const PrepareOptions& opt) {
  if (opt.language_model) {
    if (opt.tgt_lang.empty()) throw ConfigError("prepare --lm: --lang is required");
    if (!opt.src_lang.empty()) throw ConfigError("prepare --lm: a language-model corpus has one language (--lang), not --src");
  } else {
    if (opt.src_lang.empty() || opt.tgt_lang.empty()) throw ConfigError("prepare: --src and --tgt are required");
    if (opt.src_lang == opt.tgt_lang) throw ConfigError("prepare: source and target language must differ");
  }
  if (opt.train.empty() || opt.valid.empty()) throw ConfigError("prepare: --train and --valid prefixes are required");
  if (opt.out_dir.empty()) throw ConfigError("prepare: --output-dir is required");
  if (opt.vocab_size < 8) throw ConfigError("prepare: --vocab-size must be at least 8");
  if (opt.workers < 1 || opt.workers > 256) throw ConfigError("prepare: --workers must be between 1 and 256");
  if (opt.shard_size < 0) throw ConfigError("prepare: --shard-size must be 0 (no shards) or a number of pairs");
  if (opt.spm_sample_mb < 1 || opt.spm_sample_mb > (int64_t{1} << 20)) {
    throw ConfigError("prepare: --spm-sample-mb must be between 1 and 1048576 (megabytes)");
  }
  if (!opt.spm_model.empty() && !io::file_exists(opt.spm_model)) {
    throw DataError(opt.spm_model + ": SentencePiece model not found");
  }
}

// Runs `work(w)` for w = 0..workers-1 at once (0 on this thread) and rethrows the first error.
void run_workers(size_t workers, const std::function<void(size_t)>& work) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(workers);
  for (size_t w = 1; w < workers; ++w) {
    threads.emplace_back([&, w] {
      try {
        work(w);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  try {
    work(0);
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// The passes of one run, in the order prepare() calls them; each reads what the ones before left
// in the private temporary directory `tmp`.
class Preparation {
 public:
  explicit Preparation(const PrepareOptions& opt) : opt_(opt), lm_(opt.language_model), joint_(opt.joint || lm_) {
    splits_ = {{"train", opt.train}, {"valid", opt.valid}};
    if (!opt.test.empty()) splits_.push_back({"test", opt.test});
  }
  void check_inputs();
  void train_subwords(const std::string& tmp);
  void encode_splits();
  void build_dictionaries();
  PrepareReport binarize();
  void write_meta(const std::vector<std::string>& shards) const;

 private:
  struct Split {
    std::string name, prefix;
  };
  std::string sample_train(const std::string& src_path, const std::string& tgt_path);
  SplitCounts binarize_split(size_t k, std::vector<std::string>& shards);
  std::string meta_text(const std::vector<std::string>& shard_dirs) const;
  std::string pieces_path(size_t k, const char* side) const {
    return tmp_ + "/pieces." + std::to_string(k) + "." + side;
  }

  const PrepareOptions& opt_;
  const bool lm_, joint_;
  std::string tmp_;
  std::vector<Split> splits_;
  KeptLines train_keep_;  // with dedup: which lines of train are kept
  int64_t duplicates_ = 0;
  std::string src_model_, tgt_model_;  // the SentencePiece models' names in tmp_
  std::vector<int64_t> encoded_;       // lines per split, for the progress of binarize
  Dictionary src_dict_, tgt_dict_;
};

// 1. Every input is read before anything is written (a pass that keeps nothing). With dedup, the
//    same pass over train marks the pairs seen before (one bit per line kept after it; the
//    fingerprints are freed at its end).
void Preparation::check_inputs() {
  for (const auto& sp : splits_) {
    if (sp.name == "train" && opt_.dedup) {
      FingerprintSet seen;
      size_t table_bytes = 0;
      for_each_pair(sp.name, sp.prefix, opt_, [&](const std::string& s, const std::string& t) {
        const bool fresh = seen.insert(pair_fingerprint(s, t));
        train_keep_.push_back(fresh);
        duplicates_ += !fresh;
        table_bytes = seen.bytes();
      }, "checking");
      log::info("train: " + std::to_string(duplicates_) + " exact duplicate pairs left out (" +
                std::to_string(table_bytes >> 20) + " MiB of fingerprints)");
    } else {
      for_each_pair(sp.name, sp.prefix, opt_, [](const std::string&, const std::string&) {}, "checking");
    }
  }
}

// The training text for SentencePiece: pairs drawn at random (seeded) with the probability that
// keeps about spm_sample_mb megabytes of text, so that the trainer's memory (some 20 bytes per
// byte of text) does not grow with the corpus; all of them when the corpus is smaller. Returns
// what was drawn, for the log.
std::string Preparation::sample_train(const std::string& src_path, const std::string& tgt_path) {
  uint64_t total = 0, bytes = 0, lines = 0;
  if (!src_path.empty()) total += fs::file_size(opt_.train + "." + opt_.src_lang);
  total += fs::file_size(opt_.train + "." + opt_.tgt_lang);
  const double budget = static_cast<double>(opt_.spm_sample_mb) * 1e6;
  const double p = std::min(1.0, budget / static_cast<double>(std::max<uint64_t>(total, 1)));
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::unique_ptr<io::FileWriter> a, b;
  if (!src_path.empty()) a = std::make_unique<io::FileWriter>(src_path);
  if (!tgt_path.empty()) b = std::make_unique<io::FileWriter>(tgt_path);
  auto add = [](io::FileWriter& out, const std::string& line) {
    out.write(line.data(), line.size());
    out.write("\n", 1);
  };
  for_each_pair("train", opt_.train, opt_, [&](const std::string& s, const std::string& t) {
    if (p < 1 && uniform(rng) >= p) return;
    if (a) add(*a, s);
    if (b) add(*b, t);
    bytes += (a ? s.size() + 1 : 0) + (b ? t.size() + 1 : 0);
    ++lines;
  }, "sampling for SentencePiece:", train_keep_);
  if (a) a->close();
  if (b) b->close();
  char buf[96];
  std::snprintf(buf, sizeof buf, "%llu pairs, %.1f MB of text", static_cast<unsigned long long>(lines), bytes / 1e6);
  return p < 1 ? std::string(buf) + ", sampled" : std::string(buf) + ", all of train";
}

// 2. The SentencePiece models: the one given, or trained on a sample of train (one joint model,
//    or one per language).
void Preparation::train_subwords(const std::string& tmp) {
  tmp_ = tmp;
  SpmTrainOptions so;
  so.vocab_size = opt_.vocab_size;
  so.model_type = opt_.model_type;
  if (!opt_.spm_model.empty()) {
    fs::copy_file(opt_.spm_model, tmp_ + "/spm.model", fs::copy_options::overwrite_existing);
    src_model_ = tgt_model_ = "spm.model";
  } else if (lm_) {
    const auto sample = sample_train("", tmp_ + "/spm-input.txt");
    log::info("training a SentencePiece model (" + std::to_string(opt_.vocab_size) + " pieces) on " + sample);
    SentencePiece::train({tmp_ + "/spm-input.txt"}, tmp_ + "/spm", so);
    src_model_ = tgt_model_ = "spm.model";
  } else if (opt_.joint) {
    const auto sample = sample_train(tmp_ + "/spm-input.src", tmp_ + "/spm-input.tgt");
    log::info("training a joint SentencePiece model (" + std::to_string(opt_.vocab_size) + " pieces) on " + sample);
    SentencePiece::train({tmp_ + "/spm-input.src", tmp_ + "/spm-input.tgt"}, tmp_ + "/spm", so);
    src_model_ = tgt_model_ = "spm.model";
  } else {
    const auto sample = sample_train(tmp_ + "/spm-input." + opt_.src_lang, tmp_ + "/spm-input." + opt_.tgt_lang);
    for (const auto& lang : {opt_.src_lang, opt_.tgt_lang}) {
      log::info("training a SentencePiece model for " + lang + " on " + sample);
      SentencePiece::train({tmp_ + "/spm-input." + lang}, tmp_ + "/spm." + lang, so);
    }
    src_model_ = "spm." + opt_.src_lang + ".model";
    tgt_model_ = "spm." + opt_.tgt_lang + ".model";
  }
  for (const auto& f : fs::directory_iterator(tmp_)) {
    if (f.path().filename().string().rfind("spm-input", 0) == 0) fs::remove(f.path());
  }
}

// 3. Every split to subword pieces, on disk: chunks of lines encoded by `workers` SentencePiece
//    helpers at once (two each with a model per language), written in order (memory: a chunk per
//    worker).
void Preparation::encode_splits() {
  const size_t workers = static_cast<size_t>(opt_.workers);
  const bool one_model = src_model_ == tgt_model_;
  std::vector<std::unique_ptr<SentencePiece>> src_enc, tgt_enc;
  for (size_t w = 0; w < workers; ++w) {
    src_enc.push_back(std::make_unique<SentencePiece>(tmp_ + "/" + src_model_));
    if (!one_model) tgt_enc.push_back(std::make_unique<SentencePiece>(tmp_ + "/" + tgt_model_));
  }
  auto encoder = [&](size_t w, bool source) -> const SentencePiece& {
    return source || one_model ? *src_enc[w] : *tgt_enc[w];
  };
  constexpr size_t kChunk = 4096;
  encoded_.assign(splits_.size(), 0);
  for (size_t k = 0; k < splits_.size(); ++k) {
    PiecesFile ps(pieces_path(k, "src")), pt(pieces_path(k, "tgt"));
    std::vector<std::string> src_lines, tgt_lines;
    auto encode_chunk = [&] {
      const size_t n = tgt_lines.size();
      std::vector<std::vector<std::string>> src_out(n), tgt_out(n);
      run_workers(workers, [&](size_t w) {
        for (size_t i = w; i < n; i += workers) {
          if (!lm_) src_out[i] = encoder(w, true).encode(src_lines[i]);
          tgt_out[i] = encoder(w, false).encode(tgt_lines[i]);
        }
      });
      for (size_t i = 0; i < n; ++i) ps.add(src_out[i]), pt.add(tgt_out[i]);
      encoded_[k] += static_cast<int64_t>(n);
      src_lines.clear(), tgt_lines.clear();
    };
    for_each_pair(splits_[k].name, splits_[k].prefix, opt_, [&](const std::string& s, const std::string& t) {
      src_lines.push_back(s), tgt_lines.push_back(t);
      if (tgt_lines.size() == kChunk * workers) encode_chunk();
    }, "encoding", k == 0 ? train_keep_ : KeptLines{});
    if (!tgt_lines.empty()) encode_chunk();
    ps.close();
    pt.close();
  }
}

// 4. Dictionaries from the training pieces (every source sentence, then every target one).
void Preparation::build_dictionaries() {
  std::vector<std::string> pieces;
  for (PiecesReader r(pieces_path(0, "src")); r.next(pieces);) for (const auto& p : pieces) src_dict_.add(p);
  for (PiecesReader r(pieces_path(0, "tgt")); r.next(pieces);) {
    for (const auto& p : pieces) (joint_ ? src_dict_ : tgt_dict_).add(p);
  }
  src_dict_.finalize();
  if (joint_) {
    tgt_dict_ = src_dict_;
  } else {
    tgt_dict_.finalize();
  }
  if (!lm_) src_dict_.save(tmp_ + "/dict." + opt_.src_lang + ".txt");
  tgt_dict_.save(tmp_ + "/dict." + opt_.tgt_lang + ".txt");
}

// One split's pieces as ids, streamed into the memory-mapped files; train through the length
// filters, and with shard_size into shard-000/, shard-001/, ... of shard_size pairs each (their
// names appended to `shards`).
SplitCounts Preparation::binarize_split(size_t k, std::vector<std::string>& shards) {
  SplitCounts c;
  c.name = splits_[k].name;
  if (k == 0) c.duplicates = duplicates_;
  const bool sharded = k == 0 && opt_.shard_size > 0;
  std::unique_ptr<IndexedWriter> ws, wt;
  int64_t in_shard = 0;
  auto open_writers = [&] {
    ws.reset(), wt.reset();  // the old writers' spill files go before new ones take the names
    ws = std::make_unique<IndexedWriter>(tmp_ + "/spill." + c.name + ".src");
    wt = std::make_unique<IndexedWriter>(tmp_ + "/spill." + c.name + ".tgt");
    in_shard = 0;
  };
  auto save_writers = [&] {
    std::string dir = tmp_;
    if (sharded) {
      char name[32];
      std::snprintf(name, sizeof name, "shard-%03zu", shards.size());
      shards.push_back(name);
      dir += "/" + shards.back();
      io::make_dirs(dir);
    }
    if (!lm_) ws->save(dir + "/" + c.name + "." + opt_.src_lang);
    wt->save(dir + "/" + c.name + "." + opt_.tgt_lang);
  };
  open_writers();
  PiecesReader rs(pieces_path(k, "src")), rt(pieces_path(k, "tgt"));
  Progress progress("binarizing " + c.name, static_cast<uint64_t>(encoded_[k]), "lines", stderr_is_terminal());
  std::vector<std::string> src_pieces, tgt_pieces;
  while (rs.next(src_pieces) && rt.next(tgt_pieces)) {
    if (++c.lines % 4096 == 0) progress.update(static_cast<uint64_t>(c.lines));
    auto s = lm_ ? std::vector<int64_t>{} : src_dict_.encode(src_pieces);
    auto t = tgt_dict_.encode(tgt_pieces);
    if (k == 0) {
      int64_t lt = static_cast<int64_t>(t.size()) - 1, ls = lm_ ? lt : static_cast<int64_t>(s.size()) - 1;
      if (ls < opt_.min_len || lt < opt_.min_len || ls > opt_.max_len || lt > opt_.max_len) continue;
      if (!lm_ && opt_.max_ratio > 0 && (ls > opt_.max_ratio * lt || lt > opt_.max_ratio * ls)) continue;
    }
    if (sharded && in_shard == opt_.shard_size) {
      save_writers();
      open_writers();
    }
    ++c.kept, ++in_shard;
    c.src_tokens += static_cast<int64_t>(s.size());
    c.tgt_tokens += static_cast<int64_t>(t.size());
    c.src_unk += std::count(s.begin(), s.end(), Dictionary::kUnk);
    c.tgt_unk += std::count(t.begin(), t.end(), Dictionary::kUnk);
    ws->add(s);
    wt->add(t);
  }
  progress.finish();
  c.lines += c.duplicates;
  if (c.kept == 0) throw DataError(splits_[k].name + ": every sentence was filtered out by the length filters");
  save_writers();
  fs::remove(pieces_path(k, "src"));
  fs::remove(pieces_path(k, "tgt"));
  return c;
}

// 5. Every split binarized.
PrepareReport Preparation::binarize() {
  PrepareReport report;
  report.language_model = lm_;
  report.src_vocab = src_dict_.size();
  report.tgt_vocab = tgt_dict_.size();
  for (size_t k = 0; k < splits_.size(); ++k) report.splits.push_back(binarize_split(k, report.shards));
  report.shard_size = opt_.shard_size;
  return report;
}

std::string Preparation::meta_text(const std::vector<std::string>& shard_dirs) const {
  YAML::Emitter meta;
  meta << YAML::BeginMap << YAML::Key << "task" << YAML::Value << (lm_ ? "language_modeling" : "translation")
       << YAML::Key << "src_lang" << YAML::Value << (lm_ ? opt_.tgt_lang : opt_.src_lang) << YAML::Key << "tgt_lang"
       << YAML::Value << opt_.tgt_lang << YAML::Key << "joint" << YAML::Value << joint_ << YAML::Key << "src_spm"
       << YAML::Value << src_model_ << YAML::Key << "tgt_spm" << YAML::Value << tgt_model_;
  if (!shard_dirs.empty()) meta << YAML::Key << "shards" << YAML::Value << YAML::Flow << shard_dirs;
  meta << YAML::EndMap;
  return std::string(meta.c_str()) + "\n";
}

// 6. meta.yaml. Each shard is a whole prepared directory (train/prepare's `--data a:b:c` takes
//    them one by one): the models, dictionaries and valid/test files are hard links to those of
//    the top.
void Preparation::write_meta(const std::vector<std::string>& shards) const {
  for (const auto& shard : shards) {
    for (const auto& f : fs::directory_iterator(tmp_)) {
      if (!f.is_regular_file()) continue;
      const auto target = fs::path(tmp_) / shard / f.path().filename();
      std::error_code ec;
      fs::create_hard_link(f.path(), target, ec);
      if (ec) fs::copy_file(f.path(), target);
    }
    io::atomic_write_text(tmp_ + "/" + shard + "/meta.yaml", meta_text({}));
  }
  io::atomic_write_text(tmp_ + "/meta.yaml", meta_text(shards));
}

// 7. Everything moved from `tmp` into `out_dir` (meta.yaml last, so a complete meta means complete
//    data).
void move_into_place(const std::string& tmp, const std::string& out_dir) {
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(tmp)) files.push_back(f.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return (a.filename() == "meta.yaml") < (b.filename() == "meta.yaml") ||
           ((a.filename() == "meta.yaml") == (b.filename() == "meta.yaml") && a < b);
  });
  fs::remove(out_dir + "/meta.yaml");
  for (const auto& f : files) {
    const auto target = fs::path(out_dir) / f.filename();
    if (fs::is_directory(f)) fs::remove_all(target);  // a shard of an earlier run
    fs::rename(f, target);
  }
  fs::remove_all(tmp);
}
}  // namespace

PrepareReport prepare(const PrepareOptions& opt) {
  check_prepare_options(opt);
  Preparation run(opt);
  run.check_inputs();
  // The work happens in a private temporary directory; the results move into place at the end.
  io::make_dirs(opt.out_dir);
  const std::string tmp = opt.out_dir + "/.prepare-tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp);
  io::make_dirs(tmp);
  try {
    run.train_subwords(tmp);
    run.encode_splits();
    run.build_dictionaries();
    auto report = run.binarize();
    run.write_meta(report.shards);
    move_into_place(tmp, opt.out_dir);
    return report;
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

std::string PreparedMeta::split_prefix(const std::string& split, const std::string& lang) const {
  if (format == "fairseq" && language_model()) return dir + "/" + split;  // --only-source without a language
  if (format == "fairseq") return dir + "/" + split + "." + src_lang + "-" + tgt_lang + "." + lang;
  return dir + "/" + split + "." + lang;
}

namespace {
// A directory fairseq-preprocess wrote for a translation task: its language pair from the names of
// train.<src>-<tgt>.<src>.idx and train.<src>-<tgt>.<tgt>.idx, its dictionaries beside them.
PreparedMeta fairseq_data_bin(const std::string& dir) {
  std::set<std::pair<std::string, std::string>> pairs;
  for (const auto& f : fs::directory_iterator(dir)) {
    const std::string name = f.path().filename().string();
    const auto dash = name.find('-');
    if (name.rfind("train.", 0) != 0 || f.path().extension() != ".idx" || dash == std::string::npos) continue;
    const auto dot = name.find('.', dash);
    if (dot == std::string::npos) continue;
    pairs.emplace(name.substr(6, dash - 6), name.substr(dash + 1, dot - dash - 1));
  }
  if (pairs.empty() && io::file_exists(dir + "/train.idx") && io::file_exists(dir + "/dict.txt")) {
    // fairseq-preprocess --only-source: a language model's text, dict.txt and <split>.bin/.idx.
    PreparedMeta m;
    m.format = "fairseq";
    m.task = "language_modeling";
    m.dir = fs::absolute(dir).lexically_normal().string();
    m.src_lang = m.tgt_lang = "lm";
    m.src_dict = m.tgt_dict = m.dir + "/dict.txt";
    return m;
  }
  if (pairs.empty()) {
    throw DataError(dir + "/meta.yaml: not found, and no train.<src>-<tgt>.<lang>.idx (or train.idx and dict.txt) of "
                    "fairseq-preprocess either; run 'leanseq prepare' for this directory first");
  }
  if (pairs.size() > 1) {
    std::string list;
    for (const auto& [a, b] : pairs) list += (list.empty() ? "" : ", ") + a + "-" + b;
    throw DataError(dir + ": fairseq-preprocess wrote several language pairs here (" + list +
                    "); keep one per directory");
  }
  PreparedMeta m;
  m.format = "fairseq";
  m.dir = fs::absolute(dir).lexically_normal().string();
  m.src_lang = pairs.begin()->first;
  m.tgt_lang = pairs.begin()->second;
  m.src_dict = m.dir + "/dict." + m.src_lang + ".txt";
  m.tgt_dict = m.dir + "/dict." + m.tgt_lang + ".txt";
  for (const auto& d : {m.src_dict, m.tgt_dict}) {
    if (!io::file_exists(d)) throw DataError(d + ": not found (a fairseq-preprocess directory holds its dictionaries)");
  }
  m.joint = io::read_lines(m.src_dict) == io::read_lines(m.tgt_dict);
  return m;
}
}  // namespace

PreparedMeta load_prepared(const std::string& dir) {
  std::string path = dir + "/meta.yaml";
  if (!io::file_exists(path) && fs::is_directory(dir)) return fairseq_data_bin(dir);
  if (!io::file_exists(path)) throw DataError(path + ": not found; run 'leanseq prepare' for this directory first");
  YAML::Node n;
  try {
    n = YAML::Load(io::read_file(path, "prepared data's meta.yaml", kMaxMetaBytes));
  } catch (const YAML::Exception& e) {
    throw DataError(path + ": unreadable: " + e.msg);
  }
  PreparedMeta m;
  m.dir = fs::absolute(dir).lexically_normal().string();
  for (const char* key : {"src_lang", "tgt_lang", "src_spm", "tgt_spm"}) {
    if (!n[key]) throw DataError(path + ": missing key '" + key + "'");
  }
  if (n["task"]) m.task = n["task"].as<std::string>();
  if (m.task != "translation" && m.task != "language_modeling") {
    throw DataError(path + ": task '" + m.task + "' is neither translation nor language_modeling");
  }
  m.src_lang = n["src_lang"].as<std::string>();
  m.tgt_lang = n["tgt_lang"].as<std::string>();
  m.joint = n["joint"] && n["joint"].as<bool>();
  // The SentencePiece models are files inside the directory: a path that leaves it is refused.
  for (auto [key, field] : {std::pair<const char*, std::string*>{"src_spm", &m.src_spm}, {"tgt_spm", &m.tgt_spm}}) {
    const fs::path name = fs::path(n[key].as<std::string>()).lexically_normal();
    if (name.empty() || name.is_absolute() || *name.begin() == "..") {
      throw DataError(path + ": " + key + " '" + n[key].as<std::string>().substr(0, 200) +
                      "' must name a file inside the directory");
    }
    *field = m.dir + "/" + name.string();
  }
  m.src_dict = m.dir + "/dict." + m.src_lang + ".txt";
  m.tgt_dict = m.dir + "/dict." + m.tgt_lang + ".txt";
  if (const auto shards = n["shards"]) {
    if (!shards.IsSequence() || shards.size() == 0) throw DataError(path + ": 'shards' must be a list of directories");
    for (const auto& d : shards) {
      const auto name = d.as<std::string>();
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
        throw DataError(path + ": shard '" + name + "' must be the name of a directory beside it");
      }
      m.shards.push_back(m.dir + "/" + name);
    }
  }
  return m;
}

}  // namespace leanseq::data
