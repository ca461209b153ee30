// classify: labels for new text with a trained classifier checkpoint; with labelled input, also
// accuracy and per-class scores.
#include <iostream>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/threads.h"
#include "leanseq/runtime/classifier.h"

namespace leanseq::cli {

namespace {
struct ClassifyArgs {
  std::string checkpoint, input = "-", output = "-", report;
  bool scores = false;
  int64_t batch = 64, threads = 0;
};
}  // namespace

void add_classify(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ClassifyArgs>();
  auto* sub = app.add_subcommand(
      "classify",
      "label text with a classifier checkpoint: one example per line (text, or text1<TAB>text2 for pairs); "
      "a last label column is scored");
  sub->add_option("--checkpoint,--path", a->checkpoint, "classifier checkpoint (leanseq train --task classify)")->required();
  sub->add_option("--input,-i", a->input, "input TSV ('-': stdin); a header line ending in 'label' is skipped")
      ->capture_default_str();
  sub->add_option("--output,-o", a->output, "predicted labels, one per line ('-': stdout)")->capture_default_str();
  sub->add_flag("--scores", a->scores, "also print the probability of the predicted label (label<TAB>p)");
  sub->add_option("--report", a->report, "labelled input: write accuracy and per-class scores here as JSON");
  sub->add_option("--batch-size", a->batch, "examples per batch")->capture_default_str()->check(CLI::PositiveNumber);
  sub->add_option("--threads", a->threads, kComputeThreadsHelp);
  sub->callback([a, &exit_code] {
    leanseq::set_compute_threads(a->threads);
    auto loaded = runtime::load_classifier(a->checkpoint);
    auto ds = data::read_text_tsv(a->input, loaded.pair, std::nullopt);
    if (!a->report.empty() && !ds.labelled) {
      throw ConfigError("--report: " + ds.path + " has no label column to score");
    }
    auto enc = data::encode_text(ds, loaded.dict, loaded.labels);
    auto probs = runtime::predict_probabilities(loaded.model, enc, a->batch);
    auto best = probs.max(1);
    auto p = std::get<0>(best), idx = std::get<1>(best);
    std::string out;
    std::vector<int64_t> predicted;
    for (int64_t i = 0; i < probs.size(0); ++i) {
      predicted.push_back(idx[i].item<int64_t>());
      out += loaded.labels[static_cast<size_t>(predicted.back())];
      if (a->scores) out += "\t" + std::to_string(p[i].item<double>());
      out += "\n";
    }
    if (a->output == "-") {
      std::cout << out << std::flush;
    } else {
      io::atomic_write_text(a->output, out);
    }
    if (ds.labelled) {
      auto report = eval::score_predictions(enc.labels, predicted, loaded.labels);
      std::cerr << ds.path << ": " << report.text();
      if (!a->report.empty()) io::atomic_write_text(a->report, report.json());
    }
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
