// End-to-end benchmark: trains presets (or training configs) on a prepared corpus for a bounded
// time and translates its test split with beam search, and/or translates with given checkpoints;
// all contenders side by side in one process, interleaved over rounds; prints one JSON object
// with every run, the medians and the ratios to the first contender (see bench/README.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "errors.h"
#include "leanseq/checkpoint/run_config.h"
#include "leanseq/core/config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/startup.h"
#include "leanseq/core/threads.h"
#include "leanseq/data/batching.h"
#include "leanseq/data/prepare.h"
#include "leanseq/runtime/inference.h"
#include "leanseq/train/trainer.h"
#include "median.h"

namespace {

// Peak resident set size of this process since the last reset_peak_rss(), in MiB (VmHWM).
double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      double kb;
      in >> kb;
      return kb / 1024.0;
    }
    std::getline(in, key);
  }
  return 0;
}

// Starts a new peak-RSS measurement (Linux: writing 5 to clear_refs resets VmHWM to VmRSS).
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

struct Contender {
  std::string name;
  std::string arch, config, checkpoint;  // exactly one is set
};

struct Settings {
  std::string data, save_dir = "bench-run", split = "test";
  double minutes = 2;
  int64_t updates = 0, beam = 5, batch_size = 64, max_tokens = 2048, threads = 0;
  std::vector<std::string> sets;
};

std::vector<std::vector<int64_t>> load_sources(const Settings& s) {
  auto meta = leanseq::data::load_prepared(s.data);
  leanseq::data::PairDataset ds(meta.split_prefix(s.split, meta.src_lang), std::nullopt);
  std::vector<std::vector<int64_t>> sources;
  for (size_t i = 0; i < ds.size(); ++i) {
    auto b = ds.batch({static_cast<int64_t>(i)});
    sources.emplace_back(b.src.data_ptr<int64_t>(), b.src.data_ptr<int64_t>() + b.src.numel());
  }
  return sources;
}

// Trains the contender into save_dir/<name>; returns the training figures and the checkpoint.
nlohmann::json train(const Contender& c, const Settings& s, std::string& checkpoint) {
  leanseq::ConfigValues v;
  if (!c.config.empty()) v.merge(leanseq::load_yaml_file(c.config));
  if (!c.arch.empty()) v.set("arch", c.arch, "--arch");
  const std::string dir = s.save_dir + "/" + c.name;
  v.set("data", s.data, "--data");
  v.set("save_dir", dir, "--save-dir");
  v.set("batch.max_tokens", std::to_string(s.max_tokens), "--max-tokens");
  v.set("threads", std::to_string(s.threads), "--threads");
  v.set("log.interval", "1000000", "bench");
  v.set("valid.bleu", "false", "bench");
  v.set("checkpoint.no_epoch_checkpoints", "true", "bench");
  v.set("stop.max_minutes", s.updates > 0 ? "0" : std::to_string(s.minutes), "--train-minutes");
  v.set("stop.max_update", std::to_string(s.updates), "--train-updates");
  v.merge(leanseq::parse_assignments(s.sets, "--set"));
  auto cfg = leanseq::checkpoint::resolve_run_config(v);
  std::filesystem::remove_all(dir);
  reset_peak_rss();
  leanseq::train::Trainer trainer(cfg, false);
  auto t = trainer.run();
  checkpoint = dir + "/checkpoint_last.pt";
  return {{"train_updates", t.num_updates},
          {"train_target_tokens", t.train_target_tokens},
          {"train_seconds", t.train_seconds},
          {"train_target_tokens_per_second", t.train_tokens_per_second},
          {"train_allreduce_seconds", t.comm_seconds},
          {"train_peak_rss_mib", peak_rss_mib()}};
}

nlohmann::json translate(const std::string& checkpoint, const std::vector<std::vector<int64_t>>& sources,
                         const Settings& s) {
  reset_peak_rss();
  auto lt = leanseq::runtime::load_translator(checkpoint);
  leanseq::decode::TranslateOptions to;
  to.search.beam = s.beam;
  to.search.max_len_a = 1.2;
  to.search.max_len_b = 10;
  to.max_sentences = s.batch_size;
  leanseq::decode::TranslationStats st;
  lt.translator->translate_ids(sources, to, &st);
  return {{"translate_sentences", st.sentences},
          {"translate_target_tokens", st.target_tokens},
          {"translate_seconds", st.seconds},
          {"translate_sentences_per_second", st.sentences / st.seconds},
          {"translate_target_tokens_per_second", st.target_tokens / st.seconds},
          {"translate_peak_rss_mib", peak_rss_mib()}};
}

// The median over runs of every numeric field.
nlohmann::json medians(const nlohmann::json& runs) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, first] : runs[0].items()) {
    if (!first.is_number()) continue;
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r[key].get<double>());
    out[key] = leanseq::bench::median(v);
  }
  return out;
}

const std::vector<std::string> kRates = {"train_target_tokens_per_second", "translate_sentences_per_second",
                                         "translate_target_tokens_per_second"};

}  // namespace

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  CLI::App app{"leanseq end-to-end benchmark"};
  Settings s;
  std::vector<std::string> archs, configs, checkpoints;
  int64_t rounds = 1;
  bool no_translate = false;
  app.add_option("--data", s.data, "directory written by leanseq prepare (with a test split)")->required();
  app.add_option("--arch", archs, "model preset(s) to train and translate with (comma-separated or repeated)")
      ->delimiter(',');
  app.add_option("--config", configs, "training config file(s) to train and translate with")->check(CLI::ExistingFile);
  app.add_option("--checkpoint", checkpoints, "checkpoint(s) to translate with, without training")
      ->check(CLI::ExistingFile);
  app.add_option("--rounds", rounds, "repetitions, interleaved over the contenders")->capture_default_str();
  app.add_option("--train-minutes", s.minutes, "training time")->capture_default_str();
  app.add_option("--train-updates", s.updates, "or a number of updates (overrides minutes)");
  app.add_option("--max-tokens", s.max_tokens, "training batch size in tokens")->capture_default_str();
  app.add_option("--beam", s.beam, "beam size for translation")->capture_default_str();
  app.add_option("--batch-size", s.batch_size, "sentences per translation batch")->capture_default_str();
  app.add_option("--split", s.split, "split to translate")->capture_default_str();
  app.add_option("--save-dir", s.save_dir, "scratch checkpoint directory")->capture_default_str();
  app.add_option("--threads", s.threads, "threads for CPU tensor work, ATen's and OpenBLAS's (0: their defaults)");
  app.add_option("--set", s.sets, "training config override key=value, for every trained contender");
  app.add_flag("--no-translate", no_translate, "train only (the contenders are presets or configs)");
  CLI11_PARSE(app, argc, argv);
  return leanseq::bench::run_reporting_errors("leanseq-bench", [&] {
    std::vector<Contender> contenders;
    for (const auto& a : archs) contenders.push_back({a, a, "", ""});
    for (const auto& c : configs) contenders.push_back({std::filesystem::path(c).stem().string(), "", c, ""});
    for (const auto& c : checkpoints) contenders.push_back({c, "", "", c});
    if (contenders.empty()) throw leanseq::ConfigError("give at least one --arch, --config or --checkpoint");
    if (rounds < 1) throw leanseq::ConfigError("--rounds must be at least 1");
    leanseq::set_compute_threads(static_cast<int>(s.threads));
    const auto sources = load_sources(s);

    std::vector<nlohmann::json> runs(contenders.size(), nlohmann::json::array());
    for (int64_t r = 0; r < rounds; ++r) {
      for (size_t i = 0; i < contenders.size(); ++i) {
        const auto& c = contenders[i];
        std::cerr << "leanseq-bench: round " << r + 1 << "/" << rounds << ": " << c.name << "\n";
        nlohmann::json run = nlohmann::json::object();
        std::string checkpoint = c.checkpoint;
        if (checkpoint.empty()) run.update(train(c, s, checkpoint));
        if (!no_translate) run.update(translate(checkpoint, sources, s));
        runs[i].push_back(run);
      }
    }
    nlohmann::json out{{"rounds", rounds},
                       {"threads", torch::get_num_threads()},
                       {"beam", s.beam},
                       {"batch_size", s.batch_size},
                       {"split", s.split},
                       {"contenders", nlohmann::json::array()}};
    nlohmann::json first;
    for (size_t i = 0; i < contenders.size(); ++i) {
      auto med = medians(runs[i]);
      if (i == 0) first = med;
      nlohmann::json ratio = nlohmann::json::object();
      for (const auto& k : kRates) {
        if (med.contains(k) && first.contains(k)) ratio[k] = med[k].get<double>() / first[k].get<double>();
      }
      out["contenders"].push_back({{"name", contenders[i].name}, {"median", med}, {"ratio_to_first", ratio},
                                   {"runs", runs[i]}});
    }
    std::cout << out.dump() << std::endl;
  });
}
