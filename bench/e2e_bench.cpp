// End-to-end benchmark: trains a preset on a prepared corpus for a bounded time and translates its
// test split with beam search; prints one JSON object (see bench/README.md).
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "leanseq/core/config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/memory.h"
#include "leanseq/data/batching.h"
#include "leanseq/data/prepare.h"
#include "leanseq/train/inference.h"
#include "leanseq/train/run_config.h"
#include "leanseq/train/trainer.h"

namespace {
// Peak resident set size of this process, in MiB (VmHWM).
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
}  // namespace

int main(int argc, char** argv) {
  leanseq::retain_freed_memory();
  CLI::App app{"leanseq end-to-end benchmark"};
  std::string data, arch = "transformer_small", save_dir = "bench-run", split = "test";
  double minutes = 2;
  int64_t updates = 0, beam = 5, batch_size = 64, max_tokens = 2048, threads = 0;
  std::vector<std::string> sets;
  app.add_option("--data", data, "directory written by leanseq prepare (with a test split)")->required();
  app.add_option("--arch", arch, "model preset")->capture_default_str();
  app.add_option("--train-minutes", minutes, "training time")->capture_default_str();
  app.add_option("--train-updates", updates, "or a number of updates (overrides minutes)");
  app.add_option("--max-tokens", max_tokens, "training batch size in tokens")->capture_default_str();
  app.add_option("--beam", beam, "beam size for translation")->capture_default_str();
  app.add_option("--batch-size", batch_size, "sentences per translation batch")->capture_default_str();
  app.add_option("--split", split, "split to translate")->capture_default_str();
  app.add_option("--save-dir", save_dir, "scratch checkpoint directory")->capture_default_str();
  app.add_option("--threads", threads, "intra-op threads (0: default)");
  app.add_option("--set", sets, "training config override key=value");
  CLI11_PARSE(app, argc, argv);
  try {
    leanseq::ConfigValues v;
    v.set("arch", arch, "--arch");
    v.set("data", data, "--data");
    v.set("save_dir", save_dir, "--save-dir");
    v.set("batch.max_tokens", std::to_string(max_tokens), "--max-tokens");
    v.set("threads", std::to_string(threads), "--threads");
    v.set("log.interval", "1000000", "bench");
    v.set("checkpoint.no_epoch_checkpoints", "true", "bench");
    if (updates > 0) {
      v.set("stop.max_update", std::to_string(updates), "--train-updates");
    } else {
      v.set("stop.max_minutes", std::to_string(minutes), "--train-minutes");
    }
    v.merge(leanseq::parse_assignments(sets, "--set"));
    auto cfg = leanseq::train::resolve_run_config(v);
    leanseq::train::Trainer trainer(cfg, false);
    auto t = trainer.run();
    double train_peak = peak_rss_mib();

    auto lt = leanseq::train::load_translator(save_dir + "/checkpoint_last.pt");
    auto meta = leanseq::data::load_prepared(data);
    leanseq::data::PairDataset ds(meta.split_prefix(split, meta.src_lang), std::nullopt);
    std::vector<std::vector<int64_t>> sources;
    for (size_t i = 0; i < ds.size(); ++i) {
      auto b = ds.batch({static_cast<int64_t>(i)});
      sources.emplace_back(b.src.data_ptr<int64_t>(), b.src.data_ptr<int64_t>() + b.src.numel());
    }
    leanseq::decode::TranslateOptions to;
    to.search.beam = beam;
    to.search.max_len_a = 1.2;
    to.search.max_len_b = 10;
    to.max_sentences = batch_size;
    leanseq::decode::TranslationStats st;
    lt.translator->translate_ids(sources, to, &st);
    nlohmann::json out{{"arch", arch},
                       {"threads", torch::get_num_threads()},
                       {"train_updates", t.num_updates},
                       {"train_target_tokens", t.train_target_tokens},
                       {"train_seconds", t.train_seconds},
                       {"train_target_tokens_per_second", t.train_tokens_per_second},
                       {"train_peak_rss_mib", train_peak},
                       {"translate_sentences", st.sentences},
                       {"translate_target_tokens", st.target_tokens},
                       {"translate_seconds", st.seconds},
                       {"translate_sentences_per_second", st.sentences / st.seconds},
                       {"translate_target_tokens_per_second", st.target_tokens / st.seconds},
                       {"beam", beam},
                       {"batch_size", batch_size}};
    std::cout << out.dump() << std::endl;
  } catch (const leanseq::Error& e) {
    std::cerr << "leanseq-bench: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "leanseq-bench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
