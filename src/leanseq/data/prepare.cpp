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

  // 1. Validate every input before writing anything (a pass that keeps nothing).
  struct Split {
    std::string name, prefix;
  };
  std::vector<Split> splits{{"train", opt.train}, {"valid", opt.valid}};
  if (!opt.test.empty()) splits.push_back({"test", opt.test});
  //    With dedup, the same pass over train marks the pairs seen before (one bit per line kept
  //    after it; the fingerprints are freed at its end).
  KeptLines train_keep;
  int64_t duplicates = 0;
  for (const auto& sp : splits) {
    if (sp.name == "train" && opt.dedup) {
      FingerprintSet seen;
      size_t table_bytes = 0;
      for_each_pair(sp.name, sp.prefix, opt, [&](const std::string& s, const std::string& t) {
        const bool fresh = seen.insert(pair_fingerprint(s, t));
        train_keep.push_back(fresh);
        duplicates += !fresh;
        table_bytes = seen.bytes();
      }, "checking");
      log::info("train: " + std::to_string(duplicates) + " exact duplicate pairs left out (" +
                std::to_string(table_bytes >> 20) + " MiB of fingerprints)");
    } else {
      for_each_pair(sp.name, sp.prefix, opt, [](const std::string&, const std::string&) {}, "checking");
    }
  }

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
    // The training text for SentencePiece: pairs drawn at random (seeded) with the probability that
    // keeps about spm_sample_mb megabytes of text, so that the trainer's memory (some 20 bytes per
    // byte of text) does not grow with the corpus; all of them when the corpus is smaller.
    std::string sample_text;
    auto copy_train = [&](const std::string& src_path, const std::string& tgt_path) {
      uint64_t total = 0, bytes = 0, lines = 0;
      if (!src_path.empty()) total += fs::file_size(opt.train + "." + opt.src_lang);
      total += fs::file_size(opt.train + "." + opt.tgt_lang);
      const double budget = static_cast<double>(opt.spm_sample_mb) * 1e6;
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
      for_each_pair("train", opt.train, opt, [&](const std::string& s, const std::string& t) {
        if (p < 1 && uniform(rng) >= p) return;
        if (a) add(*a, s);
        if (b) add(*b, t);
        bytes += (a ? s.size() + 1 : 0) + (b ? t.size() + 1 : 0);
        ++lines;
      }, "sampling for SentencePiece:", train_keep);
      if (a) a->close();
      if (b) b->close();
      char buf[96];
      std::snprintf(buf, sizeof buf, "%llu pairs, %.1f MB of text", static_cast<unsigned long long>(lines), bytes / 1e6);
      sample_text = p < 1 ? std::string(buf) + ", sampled" : std::string(buf) + ", all of train";
    };
    if (!opt.spm_model.empty()) {
      fs::copy_file(opt.spm_model, tmp + "/spm.model", fs::copy_options::overwrite_existing);
      src_model = tgt_model = "spm.model";
    } else if (lm) {
      copy_train("", tmp + "/spm-input.txt");
      log::info("training a SentencePiece model (" + std::to_string(opt.vocab_size) + " pieces) on " + sample_text);
      SentencePiece::train({tmp + "/spm-input.txt"}, tmp + "/spm", so);
      src_model = tgt_model = "spm.model";
    } else if (opt.joint) {
      copy_train(tmp + "/spm-input.src", tmp + "/spm-input.tgt");
      log::info("training a joint SentencePiece model (" + std::to_string(opt.vocab_size) + " pieces) on " +
                sample_text);
      SentencePiece::train({tmp + "/spm-input.src", tmp + "/spm-input.tgt"}, tmp + "/spm", so);
      src_model = tgt_model = "spm.model";
    } else {
      copy_train(tmp + "/spm-input." + opt.src_lang, tmp + "/spm-input." + opt.tgt_lang);
      for (const auto& lang : {opt.src_lang, opt.tgt_lang}) {
        log::info("training a SentencePiece model for " + lang + " on " + sample_text);
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
    std::vector<int64_t> encoded(splits.size(), 0);  // lines per split, for the progress of step 5
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
        encoded[k] += static_cast<int64_t>(n);
        src_lines.clear(), tgt_lines.clear();
      };
      for_each_pair(splits[k].name, splits[k].prefix, opt, [&](const std::string& s, const std::string& t) {
        src_lines.push_back(s), tgt_lines.push_back(t);
        if (tgt_lines.size() == kChunk * workers) encode_chunk();
      }, "encoding", k == 0 ? train_keep : KeptLines{});
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

    // 5. Binarize with filters on train, streaming into the memory-mapped files; with shard_size,
    //    train goes to shard-000/, shard-001/, ... of shard_size pairs each.
    PrepareReport report;
    report.language_model = lm;
    report.src_vocab = src_dict.size();
    report.tgt_vocab = tgt_dict.size();
    std::vector<std::string> shards;
    for (size_t k = 0; k < splits.size(); ++k) {
      SplitCounts c;
      c.name = splits[k].name;
      if (k == 0) c.duplicates = duplicates;
      const bool sharded = k == 0 && opt.shard_size > 0;
      std::unique_ptr<IndexedWriter> ws, wt;
      int64_t in_shard = 0;
      auto open_writers = [&] {
        ws.reset(), wt.reset();  // the old writers' spill files go before new ones take the names
        ws = std::make_unique<IndexedWriter>(tmp + "/spill." + c.name + ".src");
        wt = std::make_unique<IndexedWriter>(tmp + "/spill." + c.name + ".tgt");
        in_shard = 0;
      };
      auto save_writers = [&] {
        std::string dir = tmp;
        if (sharded) {
          char name[32];
          std::snprintf(name, sizeof name, "shard-%03zu", shards.size());
          shards.push_back(name);
          dir += "/" + shards.back();
          io::make_dirs(dir);
        }
        if (!lm) ws->save(dir + "/" + c.name + "." + opt.src_lang);
        wt->save(dir + "/" + c.name + "." + opt.tgt_lang);
      };
      open_writers();
      PiecesReader rs(pieces_path(k, "src")), rt(pieces_path(k, "tgt"));
      Progress progress("binarizing " + c.name, static_cast<uint64_t>(encoded[k]), "lines", stderr_is_terminal());
      std::vector<std::string> src_pieces, tgt_pieces;
      while (rs.next(src_pieces) && rt.next(tgt_pieces)) {
        if (++c.lines % 4096 == 0) progress.update(static_cast<uint64_t>(c.lines));
        auto s = lm ? std::vector<int64_t>{} : src_dict.encode(src_pieces);
        auto t = tgt_dict.encode(tgt_pieces);
        if (k == 0) {
          int64_t lt = static_cast<int64_t>(t.size()) - 1, ls = lm ? lt : static_cast<int64_t>(s.size()) - 1;
          if (ls < opt.min_len || lt < opt.min_len || ls > opt.max_len || lt > opt.max_len) continue;
          if (!lm && opt.max_ratio > 0 && (ls > opt.max_ratio * lt || lt > opt.max_ratio * ls)) continue;
        }
        if (sharded && in_shard == opt.shard_size) {
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
      if (c.kept == 0) throw DataError(splits[k].name + ": every sentence was filtered out by the length filters");
      save_writers();
      fs::remove(pieces_path(k, "src"));
      fs::remove(pieces_path(k, "tgt"));
      report.splits.push_back(c);
    }

    auto meta_text = [&](const std::vector<std::string>& shard_dirs) {
      YAML::Emitter meta;
      meta << YAML::BeginMap << YAML::Key << "task" << YAML::Value << (lm ? "language_modeling" : "translation")
           << YAML::Key << "src_lang" << YAML::Value << (lm ? opt.tgt_lang : opt.src_lang) << YAML::Key
           << "tgt_lang" << YAML::Value << opt.tgt_lang << YAML::Key << "joint" << YAML::Value << joint
           << YAML::Key << "src_spm" << YAML::Value << src_model << YAML::Key << "tgt_spm" << YAML::Value
           << tgt_model;
      if (!shard_dirs.empty()) meta << YAML::Key << "shards" << YAML::Value << YAML::Flow << shard_dirs;
      meta << YAML::EndMap;
      return std::string(meta.c_str()) + "\n";
    };
    // Each shard is a whole prepared directory (train/prepare's `--data a:b:c` takes them one by
    // one): the models, dictionaries and valid/test files are hard links to those of the top.
    for (const auto& shard : shards) {
      for (const auto& f : fs::directory_iterator(tmp)) {
        if (!f.is_regular_file()) continue;
        const auto target = fs::path(tmp) / shard / f.path().filename();
        std::error_code ec;
        fs::create_hard_link(f.path(), target, ec);
        if (ec) fs::copy_file(f.path(), target);
      }
      io::atomic_write_text(tmp + "/" + shard + "/meta.yaml", meta_text({}));
    }
    report.shards = shards;
    report.shard_size = opt.shard_size;
    io::atomic_write_text(tmp + "/meta.yaml", meta_text(shards));

    // 5. Move everything into place (meta.yaml last, so a complete meta means complete data).
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(tmp)) files.push_back(f.path());
    std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
      return (a.filename() == "meta.yaml") < (b.filename() == "meta.yaml") ||
             ((a.filename() == "meta.yaml") == (b.filename() == "meta.yaml") && a < b);
    });
    fs::remove(opt.out_dir + "/meta.yaml");
    for (const auto& f : files) {
      const auto target = fs::path(opt.out_dir) / f.filename();
      if (fs::is_directory(f)) fs::remove_all(target);  // a shard of an earlier run
      fs::rename(f, target);
    }
    fs::remove_all(tmp);
    return report;
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

std::string PreparedMeta::split_prefix(const std::string& split, const std::string& lang) const {
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
  if (pairs.empty()) {
    throw DataError(dir + "/meta.yaml: not found, and no train.<src>-<tgt>.<lang>.idx of fairseq-preprocess either; run "
                    "'leanseq prepare' for this directory first");
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
