#include "leanseq/data/prepare.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/spm.h"

namespace fs = std::filesystem;

namespace leanseq::data {
namespace {

struct RawSplit {
  std::string name;
  std::vector<std::string> src, tgt;
};

RawSplit read_split(const std::string& name, const std::string& prefix, const PrepareOptions& opt) {
  RawSplit s{name, {}, {}};
  std::string sp = prefix + "." + opt.src_lang, tp = prefix + "." + opt.tgt_lang;
  if (opt.language_model) {
    if (!io::file_exists(tp)) throw DataError(tp + ": file not found (" + name + " split, expected <prefix>.<lang>)");
    s.tgt = io::read_lines(tp);
    if (s.tgt.empty()) throw DataError(tp + ": file is empty");
    return s;
  }
  for (const auto& p : {sp, tp}) {
    if (!io::file_exists(p)) throw DataError(p + ": file not found (" + name + " split, expected <prefix>.<lang>)");
  }
  s.src = io::read_lines(sp);
  s.tgt = io::read_lines(tp);
  if (s.src.empty()) throw DataError(sp + ": file is empty");
  if (s.tgt.empty()) throw DataError(tp + ": file is empty");
  if (s.src.size() != s.tgt.size()) {
    throw DataError(sp + " has " + std::to_string(s.src.size()) + " lines but " + tp + " has " +
                    std::to_string(s.tgt.size()) + "; the sides of a parallel corpus must align line by line");
  }
  return s;
}

std::string write_lines_file(const std::string& path, const std::vector<std::string>& lines) {
  std::ostringstream os;
  for (const auto& l : lines) os << l << '\n';
  io::atomic_write_text(path, os.str());
  return path;
}

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
  if (!opt.spm_model.empty() && !io::file_exists(opt.spm_model)) {
    throw DataError(opt.spm_model + ": SentencePiece model not found");
  }

  // 1. Validate every input before writing anything.
  std::vector<RawSplit> splits;
  splits.push_back(read_split("train", opt.train, opt));
  splits.push_back(read_split("valid", opt.valid, opt));
  if (!opt.test.empty()) splits.push_back(read_split("test", opt.test, opt));

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
    if (!opt.spm_model.empty()) {
      fs::copy_file(opt.spm_model, tmp + "/spm.model", fs::copy_options::overwrite_existing);
      src_model = tgt_model = "spm.model";
    } else if (lm) {
      std::string in = write_lines_file(tmp + "/spm-input.txt", splits[0].tgt);
      log::info("training a SentencePiece model (" + std::to_string(opt.vocab_size) + " pieces)");
      SentencePiece::train({in}, tmp + "/spm", so);
      src_model = tgt_model = "spm.model";
    } else if (opt.joint) {
      std::string a = write_lines_file(tmp + "/spm-input.src", splits[0].src);
      std::string b = write_lines_file(tmp + "/spm-input.tgt", splits[0].tgt);
      log::info("training a joint SentencePiece model (" + std::to_string(opt.vocab_size) + " pieces)");
      SentencePiece::train({a, b}, tmp + "/spm", so);
      src_model = tgt_model = "spm.model";
    } else {
      for (const auto& [lang, lines] : {std::pair{opt.src_lang, &splits[0].src}, std::pair{opt.tgt_lang, &splits[0].tgt}}) {
        std::string in = write_lines_file(tmp + "/spm-input." + lang, *lines);
        log::info("training a SentencePiece model for " + lang);
        SentencePiece::train({in}, tmp + "/spm." + lang, so);
      }
      src_model = "spm." + opt.src_lang + ".model";
      tgt_model = "spm." + opt.tgt_lang + ".model";
    }
    for (const auto& f : fs::directory_iterator(tmp)) {
      if (f.path().filename().string().rfind("spm-input", 0) == 0) fs::remove(f.path());
    }
    SentencePiece src_sp(tmp + "/" + src_model), tgt_sp(tmp + "/" + tgt_model);

    // 3. Encode all splits to pieces; dictionaries from the training data.
    auto encode_all = [](const SentencePiece& sp, const std::vector<std::string>& lines) {
      std::vector<std::vector<std::string>> out;
      out.reserve(lines.size());
      for (const auto& l : lines) out.push_back(sp.encode(l));
      return out;
    };
    std::vector<std::vector<std::vector<std::string>>> src_pieces, tgt_pieces;
    for (const auto& s : splits) {
      src_pieces.push_back(encode_all(src_sp, s.src));
      tgt_pieces.push_back(encode_all(tgt_sp, s.tgt));
    }
    Dictionary src_dict, tgt_dict;
    const bool joint = opt.joint || lm;
    for (const auto& sent : src_pieces[0]) for (const auto& p : sent) src_dict.add(p);
    for (const auto& sent : tgt_pieces[0]) for (const auto& p : sent) (joint ? src_dict : tgt_dict).add(p);
    src_dict.finalize();
    if (joint) {
      tgt_dict = src_dict;
    } else {
      tgt_dict.finalize();
    }
    if (!lm) src_dict.save(tmp + "/dict." + opt.src_lang + ".txt");
    tgt_dict.save(tmp + "/dict." + opt.tgt_lang + ".txt");

    // 4. Binarize with filters on train.
    PrepareReport report;
    report.language_model = lm;
    report.src_vocab = src_dict.size();
    report.tgt_vocab = tgt_dict.size();
    for (size_t k = 0; k < splits.size(); ++k) {
      SplitCounts c;
      c.name = splits[k].name;
      IndexedWriter ws, wt;
      for (size_t i = 0; i < splits[k].tgt.size(); ++i) {
        ++c.lines;
        auto s = lm ? std::vector<int64_t>{} : src_dict.encode(src_pieces[k][i]);
        auto t = tgt_dict.encode(tgt_pieces[k][i]);
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
