// Importing a fairseq checkpoint, and decoding with what it became: the import's wall time
// (median of --rounds imports), then the imported model against a native leanseq model of the same
// config and dictionaries (freshly initialised), decoding the same raw lines with beam search forced
// to --length tokens (so that both do the same work whatever their weights), interleaved over
// rounds. Prints one JSON object (bench/README.md).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "errors.h"
#include "leanseq/core/io.h"
#include "leanseq/core/startup.h"
#include "leanseq/core/threads.h"
#include "leanseq/interop/fairseq.h"
#include "leanseq/models/registry.h"
#include "leanseq/runtime/inference.h"
#include "median.h"

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  CLI::App app{"leanseq-import-bench: import time of a fairseq checkpoint and the imported model's decoding speed"};
  leanseq::interop::FairseqImportOptions opt;
  std::string input;
  int rounds = 3, threads = 0;
  int64_t length = 20, beam = 5, batch = 64;
  app.add_option("--checkpoint", opt.checkpoint, "fairseq checkpoint")->required();
  app.add_option("--data-dir", opt.data_dir, "its dictionaries")->required();
  app.add_option("--spm", opt.spm, "its SentencePiece model");
  app.add_option("--tokenizer", opt.tokenizer, "moses");
  app.add_option("--bpe-codes", opt.bpe_codes, "subword-nmt codes");
  app.add_option("--source-lang", opt.source_lang, "source language");
  app.add_option("--target-lang", opt.target_lang, "target language");
  app.add_option("--input,-i", input, "raw source lines to decode")->required();
  app.add_option("--rounds", rounds, "imports, and interleaved decoding rounds")->capture_default_str();
  app.add_option("--length", length, "target tokens every hypothesis is forced to")->capture_default_str();
  app.add_option("--beam", beam, "beam size")->capture_default_str();
  app.add_option("--batch-size", batch, "sentences per batch")->capture_default_str();
  app.add_option("--threads", threads, leanseq::kComputeThreadsHelp);
  CLI11_PARSE(app, argc, argv);
  return leanseq::bench::run_reporting_errors("leanseq-import-bench", [&] {
    if (rounds < 1 || length < 1 || beam < 1 || batch < 1) throw leanseq::ConfigError("--rounds, --length, --beam, --batch-size: at least 1");
    leanseq::set_compute_threads(threads);
    const auto dir = std::filesystem::temp_directory_path() / ("leanseq-import-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    opt.out = (dir / "imported.pt").string();
    using Clock = std::chrono::steady_clock;
    std::vector<double> import_ms;
    leanseq::interop::FairseqImportResult imported;
    for (int r = 0; r < rounds; ++r) {
      const auto t0 = Clock::now();
      imported = leanseq::interop::import_fairseq(opt);
      import_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    auto fairseq_model = leanseq::runtime::load_translator(opt.out);
    auto native = leanseq::runtime::load_translator(opt.out);
    // The native contender: the same network, leanseq's own initialisation.
    auto& loaded = native.loaded;
    auto fresh = leanseq::models::build_model(*loaded.model_config, {loaded.src_vocab_size, loaded.tgt_vocab_size, loaded.vocab.joint});
    {
      torch::NoGradGuard no_grad;
      auto dst = loaded.model->parameters();
      auto src = fresh->parameters();
      for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
    }
    const auto lines = leanseq::io::read_lines(input);
    leanseq::decode::TranslateOptions t;
    t.search.beam = beam;
    t.search.max_len_a = 0;
    t.search.max_len_b = length;
    t.search.min_len = length;
    t.max_sentences = batch;
    std::vector<double> imported_sps, native_sps;
    for (int r = 0; r < rounds; ++r) {
      for (int which = 0; which < 2; ++which) {
        const bool first = (r + which) % 2 == 0;
        leanseq::decode::TranslationStats stats;
        (first ? fairseq_model : native).translator->translate(lines, t, &stats);
        (first ? imported_sps : native_sps).push_back(static_cast<double>(stats.sentences) / stats.seconds);
      }
    }
    std::filesystem::remove_all(dir);
    const double a = leanseq::bench::median(imported_sps), b = leanseq::bench::median(native_sps);
    nlohmann::json out = {{"benchmark", "import_fairseq"},
                          {"checkpoint", opt.checkpoint},
                          {"fairseq_arch", imported.fairseq_arch},
                          {"parameters", imported.parameters},
                          {"import_ms", import_ms},
                          {"import_ms_median", leanseq::bench::median(import_ms)},
                          {"sentences", lines.size()},
                          {"beam", beam},
                          {"length", length},
                          {"threads", leanseq::compute_threads()},
                          {"imported_sentences_per_second", imported_sps},
                          {"native_sentences_per_second", native_sps},
                          {"imported_median", a},
                          {"native_median", b},
                          {"imported_to_native", a / b}};
    std::cout << out.dump() << "\n";
  });
}
