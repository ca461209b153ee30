#include "leanseq/data/prepare.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/line_reader.h"
#include "leanseq/core/logging.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/spm.h"

namespace fs = std::filesystem;

namespace leanseq::data {
namespace {

// A split's two files read in step, one pair at a time: fn(source line, target line), the source
// empty for a language model. DataError naming the file and line for text that is not UTF-8, an
// empty file, or sides of different lengths. Nothing is kept: memory does not grow with the corpus.
int64_t for_each_pair(const std::string& name, const std::string& prefix, const PrepareOptions& opt,
                      const std::function<void(const std::string&, const std::string&)>& fn) {
  const std::string sp = prefix + "." + opt.src_lang, tp = prefix + "." + opt.tgt_lang;
  const bool lm = opt.language_model;
  for (const auto& p : lm ? std::vector<std::string>{tp} : std::vector<std::string>{sp, tp}) {
    if (!io::file_exists(p)) throw DataError(p + ": file not found (" + name + " split, expected <prefix>.<lang>)");
  }
  std::unique_ptr<io::LineReader> src;
  if (!lm) src = std::make_unique<io::LineReader>(sp);
  io::LineReader tgt(tp);
  auto check = [](const std::string& path, int64_t line_no, const std::string& line) {
    const long bad = io::utf8_invalid_offset(line);
    if (bad >= 0) {
      throw DataError(path + ":" + std::to_string(line_no) + ": invalid UTF-8 at byte " + std::to_string(bad + 1) +
                      " of the line (expected UTF-8 text)");
    }
  };
  std::string s, t;
  int64_t ns = 0, nt = 0;
  for (;;) {
    const bool has_s = !lm && src->next(s), has_t = tgt.next(t);
    if (has_s) check(sp, ++ns, s);
    if (has_t) check(tp, ++nt, t);
    if (has_t && (lm || has_s)) {
      fn(lm ? std::string() : s, t);
    } else if (!has_s && !has_t) {
      break;
    }
  }
  if (!lm && ns == 0) throw DataError(sp + ": file is empty");
  if (nt == 0) throw DataError(tp + ": file is empty");
  if (!lm && ns != nt) {
    throw DataError(sp + " has " + std::to_string(ns) + " lines but " + tp + " has " + std::to_string(nt) +
                    "; the sides of a parallel corpus must align line by line");
  }
  return nt;
}

// Subword pieces of one line after another, length-prefixed (a piece may hold any byte), so that
// the dictionary can be counted before the ids are written without keeping the pieces in memory.
class PiecesFile {
 public:
  explicit PiecesFile(const std::string& path) : out_(path) {}
  void add(const std::vector<std::string>& pieces) {
    put(static_cast<uint32_t>(pieces.size()));
    for (const auto& p : pieces) {
      put(static_cast<uint32_t>(p.size()));
      out_.write(p.data(), p.size());
    }
  }
  void close() { out_.close(); }

 private:
  void put(uint32_t n) { out_.write(&n, sizeof n); }
  io::FileWriter out_;
};

class PiecesReader {
 public:
  explicit PiecesReader(const std::string& path) : in_(path, std::ios::binary) {
    if (!in_) throw DataError(path + ": cannot open");
  }
  bool next(std::vector<std::string>& pieces) {
    uint32_t n = 0;
    if (!in_.read(reinterpret_cast<char*>(&n), sizeof n)) return false;
    pieces.resize(n);
    for (auto& p : pieces) {
      uint32_t len = 0;
      in_.read(reinterpret_cast<char*>(&len), sizeof len);
      p.resize(len);
      in_.read(p.data(), len);
    }
    if (!in_) throw DataError("a temporary pieces file of prepare is truncated");
    return true;
  }

 private:
  std::ifstream in_;
};

}  // namespace

std::string PrepareReport::format() const {
  std::ostringstream os;
  if (language_model) {
    os << "vocabulary: " << tgt_vocab << " symbols\n";
    for (const auto& s : splits) {
      os << s.name << ": " << s.kept << " of " << s.lines << " sentences kept, " << s.tgt_tokens << " tokens, unk "
         << s.tgt_unk << "\n";
    }
    return os.str();
  }
  os << "vocabulary: src " << src_vocab << " / tgt " << tgt_vocab << " symbols\n";
  for (const auto& s : splits) {
    os << s.name << ": " << s.kept << " of " << s.lines << " pairs kept";
    if (s.kept != s.lines) os << " (" << (s.lines - s.kept) << " filtered by length/ratio)";
    os << ", " << s.src_tokens << " src / " << s.tgt_tokens << " tgt tokens, unk "
       << s.src_unk << " / " << s.tgt_unk << "\n";
  }
  return os.str();
}

PrepareReport prepare(const PrepareOptions& opt) {
  const bool lm = opt.language_model;
  if (lm) {
    if (opt.tgt_lang.empty()) throw ConfigError("prepare --lm: --lang is required");
    if (!opt.src_lang.empty()) throw ConfigError("prepare --lm: a language-model corpus has one language (--lang), not --src");
  } else {
    if (opt.src_lang.empty() || opt.tgt_lang.empty()) throw ConfigError("prepare: --src and --tgt are required");
    if (opt.src_lang == opt.tgt_lang) throw ConfigError("prepare: source and target language must differ");
  }
  if (opt.train.empty() || opt.valid.empty()) throw ConfigError("prepare: --train and --valid prefixes are required");
  if (opt.out_dir.empty()) throw ConfigError("prepare: --out is required");
  if (opt.vocab_size < 8) throw ConfigError("prepare: --vocab-size must be at least 8");
  if (opt.workers < 1 || opt.workers > 256) throw ConfigError("prepare: --workers must be between 1 and 256");
  if (!opt.spm_model.empty() && !io::file_exists(opt.spm_model)) {
    throw DataError(opt.spm_model + ": SentencePiece model not found");
  }

  // 1. Validate every input before writing anything (a pass that keeps nothing).
  struct Split {
    std::string name, prefix;
  };
  std::vector<Split> splits{{"train", opt.train}, {"valid", opt.valid}};
  if (!opt.test.empty()) splits.push_back({"test", opt.test});
  for (const auto& sp : splits) for_each_pair(sp.name, sp.prefix, opt, [](const std::string&, const std::string&) {});

  // 2. Work in a private temporary directory; move results into place at the end.
  io::make_dirs(opt.out_dir);
  std::string tmp = opt.out_dir + "/.prepare-tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp);
  io::make_dirs(tmp);
  try {
    SpmTrainOptions so;
    so.vocab_size = opt.vocab_size;
    so.model_type = opt.model_type;
    std::string src_model, tgt_model;
    // The training text for SentencePiece, copied line by line (the trainer samples at most
    // so.input_sentence_size lines of it).
    auto copy_train = [&](const std::string& src_path, const std::string& tgt_path) {
      std::unique_ptr<io::FileWriter> a, b;
      if (!src_path.empty()) a = std::make_unique<io::FileWriter>(src_path);
      if (!tgt_path.empty()) b = std::make_unique<io::FileWriter>(tgt_path);
      auto add = [](io::FileWriter& out, const std::string& line) {
        out.write(line.data(), line.size());
        out.write("\n", 1);
      };
      for_each_pair("train", opt.train, opt, [&](const std::string& s, const std::string& t) {
        if (a) add(*a, s);
        if (b) add(*b, t);
      });
      if (a) a->close();
      if (b) b->close();
    };
    if (!opt.spm_model.empty()) {
      fs::copy_file(opt.spm_model, tmp + "/spm.model", fs::copy_options::overwrite_existing);
      src_model = tgt_model = "spm.model";
    } else if (lm) {
      copy_train("", tmp + "/spm-input.txt");
      log::info("training a SentencePiece model (" + std::to_string(opt.vocab_size) + " pieces)");
      SentencePiece::train({tmp + "/spm-input.txt"}, tmp + "/spm", so);
      src_model = tgt_model = "spm.model";
    } else if (opt.joint) {
      copy_train(tmp + "/spm-input.src", tmp + "/spm-input.tgt");
      log::info("training a joint SentencePiece model (" + std::to_string(opt.vocab_size) + " pieces)");
      SentencePiece::train({tmp + "/spm-input.src", tmp + "/spm-input.tgt"}, tmp + "/spm", so);
      src_model = tgt_model = "spm.model";
    } else {
      copy_train(tmp + "/spm-input." + opt.src_lang, tmp + "/spm-input." + opt.tgt_lang);
      for (const auto& lang : {opt.src_lang, opt.tgt_lang}) {
        log::info("training a SentencePiece model for " + lang);
        SentencePiece::train({tmp + "/spm-input." + lang}, tmp + "/spm." + lang, so);
      }
      src_model = "spm." + opt.src_lang + ".model";
      tgt_model = "spm." + opt.tgt_lang + ".model";
    }
    for (const auto& f : fs::directory_iterator(tmp)) {
      if (f.path().filename().string().rfind("spm-input", 0) == 0) fs::remove(f.path());
    }

    // 3. Every split to subword pieces, on disk: chunks of lines encoded by `workers` SentencePiece
    //    helpers at once (two each with a model per language), written in order (memory: a chunk
    //    per worker).
    const size_t workers = static_cast<size_t>(opt.workers);
    const bool one_model = src_model == tgt_model;
    std::vector<std::unique_ptr<SentencePiece>> src_enc, tgt_enc;
    for (size_t w = 0; w < workers; ++w) {
      src_enc.push_back(std::make_unique<SentencePiece>(tmp + "/" + src_model));
      if (!one_model) tgt_enc.push_back(std::make_unique<SentencePiece>(tmp + "/" + tgt_model));
    }
    auto encoder = [&](size_t w, bool source) -> const SentencePiece& {
      return source || one_model ? *src_enc[w] : *tgt_enc[w];
    };
    constexpr size_t kChunk = 4096;
    auto pieces_path = [&](size_t k, const char* side) { return tmp + "/pieces." + std::to_string(k) + "." + side; };
    for (size_t k = 0; k < splits.size(); ++k) {
      PiecesFile ps(pieces_path(k, "src")), pt(pieces_path(k, "tgt"));
      std::vector<std::string> src_lines, tgt_lines;
      auto encode_chunk = [&] {
        const size_t n = tgt_lines.size();
        std::vector<std::vector<std::string>> src_out(n), tgt_out(n);
        auto run = [&](size_t w) {
          for (size_t i = w; i < n; i += workers) {
            if (!lm) src_out[i] = encoder(w, true).encode(src_lines[i]);
            tgt_out[i] = encoder(w, false).encode(tgt_lines[i]);
          }
        };
        std::vector<std::thread> threads;
        std::vector<std::exception_ptr> errors(workers);
        for (size_t w = 1; w < workers; ++w) {
          threads.emplace_back([&, w] {
            try {
              run(w);
            } catch (...) {
              errors[w] = std::current_exception();
            }
          });
        }
        try {
          run(0);
        } catch (...) {
          errors[0] = std::current_exception();
        }
        for (auto& t : threads) t.join();
        for (auto& e : errors) {
          if (e) std::rethrow_exception(e);
        }
        for (size_t i = 0; i < n; ++i) ps.add(src_out[i]), pt.add(tgt_out[i]);
        src_lines.clear(), tgt_lines.clear();
      };
      for_each_pair(splits[k].name, splits[k].prefix, opt, [&](const std::string& s, const std::string& t) {
        src_lines.push_back(s), tgt_lines.push_back(t);
        if (tgt_lines.size() == kChunk * workers) encode_chunk();
      });
      if (!tgt_lines.empty()) encode_chunk();
      ps.close();
      pt.close();
    }

    // 4. Dictionaries from the training pieces (every source sentence, then every target one).
    Dictionary src_dict, tgt_dict;
    const bool joint = opt.joint || lm;
    std::vector<std::string> pieces;
    for (PiecesReader r(pieces_path(0, "src")); r.next(pieces);) for (const auto& p : pieces) src_dict.add(p);
    for (PiecesReader r(pieces_path(0, "tgt")); r.next(pieces);) {
      for (const auto& p : pieces) (joint ? src_dict : tgt_dict).add(p);
    }
    src_dict.finalize();
    if (joint) {
      tgt_dict = src_dict;
    } else {
      tgt_dict.finalize();
    }
    if (!lm) src_dict.save(tmp + "/dict." + opt.src_lang + ".txt");
    tgt_dict.save(tmp + "/dict." + opt.tgt_lang + ".txt");

    // 5. Binarize with filters on train, streaming into the memory-mapped files.
    PrepareReport report;
    report.language_model = lm;
    report.src_vocab = src_dict.size();
    report.tgt_vocab = tgt_dict.size();
    for (size_t k = 0; k < splits.size(); ++k) {
      SplitCounts c;
      c.name = splits[k].name;
      IndexedWriter ws(tmp + "/spill." + c.name + ".src"), wt(tmp + "/spill." + c.name + ".tgt");
      PiecesReader rs(pieces_path(k, "src")), rt(pieces_path(k, "tgt"));
      std::vector<std::string> src_pieces, tgt_pieces;
      while (rs.next(src_pieces) && rt.next(tgt_pieces)) {
        ++c.lines;
        auto s = lm ? std::vector<int64_t>{} : src_dict.encode(src_pieces);
        auto t = tgt_dict.encode(tgt_pieces);
        if (k == 0) {
          int64_t lt = static_cast<int64_t>(t.size()) - 1, ls = lm ? lt : static_cast<int64_t>(s.size()) - 1;
          if (ls < opt.min_len || lt < opt.min_len || ls > opt.max_len || lt > opt.max_len) continue;
          if (!lm && opt.max_ratio > 0 && (ls > opt.max_ratio * lt || lt > opt.max_ratio * ls)) continue;
        }
        ++c.kept;
        c.src_tokens += static_cast<int64_t>(s.size());
        c.tgt_tokens += static_cast<int64_t>(t.size());
        c.src_unk += std::count(s.begin(), s.end(), Dictionary::kUnk);
        c.tgt_unk += std::count(t.begin(), t.end(), Dictionary::kUnk);
        ws.add(s);
        wt.add(t);
      }
      if (c.kept == 0) throw DataError(splits[k].name + ": every sentence was filtered out by the length filters");
      if (!lm) ws.save(tmp + "/" + c.name + "." + opt.src_lang);
      wt.save(tmp + "/" + c.name + "." + opt.tgt_lang);
      fs::remove(pieces_path(k, "src"));
      fs::remove(pieces_path(k, "tgt"));
      report.splits.push_back(c);
    }

    YAML::Emitter meta;
    meta << YAML::BeginMap << YAML::Key << "task" << YAML::Value << (lm ? "language_modeling" : "translation")
         << YAML::Key << "src_lang" << YAML::Value << (lm ? opt.tgt_lang : opt.src_lang) << YAML::Key
         << "tgt_lang" << YAML::Value << opt.tgt_lang << YAML::Key << "joint" << YAML::Value << joint
         << YAML::Key << "src_spm" << YAML::Value << src_model << YAML::Key << "tgt_spm" << YAML::Value
         << tgt_model << YAML::EndMap;
    io::atomic_write_text(tmp + "/meta.yaml", std::string(meta.c_str()) + "\n");

    // 5. Move everything into place (meta.yaml last, so a complete meta means complete data).
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(tmp)) files.push_back(f.path());
    std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
      return (a.filename() == "meta.yaml") < (b.filename() == "meta.yaml") ||
             ((a.filename() == "meta.yaml") == (b.filename() == "meta.yaml") && a < b);
    });
    fs::remove(opt.out_dir + "/meta.yaml");
    for (const auto& f : files) fs::rename(f, fs::path(opt.out_dir) / f.filename());
    fs::remove_all(tmp);
    return report;
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

std::string PreparedMeta::split_prefix(const std::string& split, const std::string& lang) const {
  return dir + "/" + split + "." + lang;
}

PreparedMeta load_prepared(const std::string& dir) {
  std::string path = dir + "/meta.yaml";
  if (!io::file_exists(path)) throw DataError(path + ": not found; run 'leanseq prepare' for this directory first");
  YAML::Node n;
  try {
    n = YAML::LoadFile(path);
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
  m.src_spm = m.dir + "/" + n["src_spm"].as<std::string>();
  m.tgt_spm = m.dir + "/" + n["tgt_spm"].as<std::string>();
  m.src_dict = m.dir + "/dict." + m.src_lang + ".txt";
  m.tgt_dict = m.dir + "/dict." + m.tgt_lang + ".txt";
  return m;
}

}  // namespace leanseq::data
