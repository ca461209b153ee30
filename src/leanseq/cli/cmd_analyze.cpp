// `leanseq analyze prune`: quality against sparsity of one or more checkpoints (a model trained
// with targeted dropout beside one trained without), translation models or text classifiers, as
// JSON, CSV and a chart.
// `leanseq analyze attention`: SAN's learned sharing policy. A trained Transformer runs over
// held-out pairs; for encoder self-attention, decoder self-attention and encoder-decoder attention
// it writes the layer-to-layer similarity matrix (1 - JSD) as JSON, CSV and a heatmap, and a
// config file with the proposed blocks that `leanseq train -c` takes as it is.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "leanseq/analyze/attention_analysis.h"
#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/model.h"
#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/threads.h"
#include "leanseq/data/prepare.h"
#include "leanseq/models/layer_spec.h"
#include "leanseq/prune/pruning.h"
#include "leanseq/viz/plot.h"

namespace leanseq::cli {

namespace {
struct AnalyzeArgs {
  std::string checkpoint, data, split = "valid", output_dir;
  int64_t max_sentences = 500, max_tokens = 4096, threads = 0;
  double theta = 0.7;
};

std::string csv(const eval::Matrix& m) {
  std::ostringstream os;
  os << std::setprecision(6) << "layer";
  for (size_t j = 0; j < m.size(); ++j) os << "," << j;
  os << "\n";
  for (size_t i = 0; i < m.size(); ++i) {
    os << i;
    for (double v : m[i]) os << "," << v;
    os << "\n";
  }
  return os.str();
}

void draw(const analyze::AttentionSimilarity& s, const std::string& path) {
  viz::Heatmap h;
  h.title = s.kind;  // 1 - JSD between layers
  std::replace(h.title.begin(), h.title.end(), '_', ' ');
  for (size_t i = 0; i < s.matrix.size(); ++i) h.row_labels.push_back("layer " + std::to_string(i));
  h.col_labels = h.row_labels;
  h.values = s.matrix;
  viz::plot_heatmap(h, path);
}

void run_attention(const AnalyzeArgs& a) {
  if (a.theta < 0 || a.theta > 1) throw ConfigError("--theta must be in [0, 1]");
  if (a.max_tokens < 1) throw ConfigError("--max-tokens must be positive");
  const auto ck = checkpoint::read_checkpoint(a.checkpoint);
  auto loaded = checkpoint::load_model(ck, a.checkpoint);
  const std::string data_dir = a.data.empty() ? checkpoint::training_config(ck, a.checkpoint).data : a.data;
  if (data_dir.empty()) throw ConfigError(a.checkpoint + ": names no data directory; give --data");
  auto meta = data::load_prepared(data_dir);
  if (io::read_file(meta.src_dict) != loaded.vocab.src_dict ||
      io::read_file(meta.tgt_dict) != loaded.vocab.tgt_dict) {
    throw DataError(data_dir + ": prepared with other dictionaries than the checkpoint " + a.checkpoint);
  }
  data::PairDataset ds(meta.split_prefix(a.split, meta.src_lang), meta.split_prefix(a.split, meta.tgt_lang));
  auto sims = analyze::attention_similarity(*loaded.model, ds, a.max_sentences, a.max_tokens);

  io::make_dirs(a.output_dir);
  nlohmann::json report{{"checkpoint", a.checkpoint}, {"data", data_dir}, {"split", a.split},
                        {"sentences", a.max_sentences > 0 ? std::min<int64_t>(a.max_sentences, ds.size()) : ds.size()},
                        {"theta", a.theta}, {"kinds", nlohmann::json::object()}};
  std::ostringstream yaml;
  yaml << "# SAN blocks proposed by leanseq analyze attention (theta " << a.theta << ") from " << a.checkpoint
       << "\n";
  std::map<std::string, std::map<std::string, std::string>> keys;  // side -> key -> groups
  for (const auto& s : sims) {
    auto groups = models::format_layer_groups(eval::propose_blocks(s.matrix, a.theta));
    const std::string config_key = "model." + s.side + "." + s.key;
    report["kinds"][s.kind] = {{"similarity", s.matrix}, {"positions", s.positions}, {"groups", groups},
                               {"config_key", config_key}};
    io::atomic_write_text(a.output_dir + "/" + s.kind + ".csv", csv(s.matrix));
    if (viz::charts_available()) draw(s, a.output_dir + "/" + s.kind + ".png");
    keys[s.side][s.key] = groups;
    std::cout << config_key << ": \"" << groups << "\"\n";
  }
  yaml << "model:\n";
  for (const auto& [side, kv] : keys) {
    yaml << "  " << side << ":\n";
    for (const auto& [k, v] : kv) yaml << "    " << k << ": \"" << v << "\"\n";
  }
  io::atomic_write_text(a.output_dir + "/similarity.json", report.dump(2) + "\n");
  io::atomic_write_text(a.output_dir + "/groups.yaml", yaml.str());
  log::info("wrote " + a.output_dir + "/{similarity.json, groups.yaml, <kind>.csv, <kind>.png}");
}
struct PruneCurveArgs {
  std::vector<std::string> checkpoints, labels;
  std::string src, ref, tsv, method = "weight", sparsities = "0,30,50,70,90", output_dir;
  // Translation models decode with translate's defaults unless these are given.
  int64_t beam = decode::SearchOptions{}.beam, max_sentences = decode::TranslateOptions{}.max_sentences, threads = 0;
  double lenpen = decode::SearchOptions{}.lenpen;
};

std::vector<double> parse_percentages(const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      double v = std::stod(item, &used);
      if (used != item.size() || v < 0 || v > 100) throw std::invalid_argument(item);
      out.push_back(v / 100.0);
    } catch (const std::exception&) {
      throw ConfigError("--sparsities: '" + item + "' is not a percentage in [0, 100]");
    }
  }
  if (out.empty()) throw ConfigError("--sparsities: no values");
  return out;
}

// How a score of prune::Scores reads in a chart and on the terminal.
std::string score_title(const std::string& name) {
  if (name == "bleu") return "BLEU";
  if (name == "chrf") return "chrF";
  if (name == "accuracy") return "accuracy (%)";
  if (name == "macro_f1") return "macro F1 (%)";
  return name;
}

// Every checkpoint is of one kind (their first scores share the chart's axis) and has the data it
// is scored on: a labelled TSV for text classifiers, sources and references for translation models.
bool check_prune_inputs(const PruneCurveArgs& a) {
  const bool classifiers = checkpoint::is_classifier_checkpoint(a.checkpoints[0]);
  auto kind = [](bool classifier) { return classifier ? "a text classifier" : "a translation model"; };
  for (const auto& ck : a.checkpoints) {
    if (checkpoint::is_classifier_checkpoint(ck) != classifiers) {
      throw ConfigError("--checkpoint: " + ck + " is " + kind(!classifiers) + " but " + a.checkpoints[0] + " is " +
                        kind(classifiers) + "; compare checkpoints of one kind");
    }
  }
  if (classifiers && a.tsv.empty()) {
    throw ConfigError("--tsv: text classifier checkpoints are scored on a labelled TSV file; give --tsv");
  }
  if (!classifiers && (a.src.empty() || a.ref.empty())) {
    throw ConfigError("--src/--ref: translation checkpoints are scored on source sentences and references; give both");
  }
  return classifiers;
}

void run_prune_curve(const PruneCurveArgs& a) {
  if (a.method != "weight" && a.method != "unit") throw ConfigError("--method: '" + a.method + "' is not weight or unit");
  const auto sparsities = parse_percentages(a.sparsities);
  if (!a.labels.empty() && a.labels.size() != a.checkpoints.size()) {
    throw ConfigError("--label: " + std::to_string(a.labels.size()) + " labels for " +
                      std::to_string(a.checkpoints.size()) + " checkpoints (give one per checkpoint, or none)");
  }
  const bool classifiers = check_prune_inputs(a);
  nlohmann::json report{{"method", a.method}, {"models", nlohmann::json::array()}};
  std::vector<std::string> sources, refs;
  decode::TranslateOptions opt;
  if (classifiers) {
    report["tsv"] = a.tsv;
  } else {
    sources = io::read_lines(a.src), refs = io::read_lines(a.ref);
    opt.search.beam = a.beam;
    opt.search.lenpen = a.lenpen;
    opt.max_sentences = a.max_sentences;
    report["src"] = a.src, report["ref"] = a.ref, report["beam"] = a.beam;
  }
  std::ostringstream table;
  viz::Panel panel{"", "sparsity (%)", "", {}};
  for (size_t i = 0; i < a.checkpoints.size(); ++i) {
    const auto& ck = a.checkpoints[i];
    auto curve = classifiers ? prune::classifier_prune_curve(ck, a.tsv, sparsities, a.method, a.max_sentences)
                             : prune::translation_prune_curve(ck, sources, refs, sparsities, a.method, opt);
    if (i == 0) {
      table << "checkpoint,sparsity,zeros";
      for (const auto& [name, value] : curve.front().scores) table << "," << name;
      table << "\n";
      panel.y_label = score_title(curve.front().scores.front().first);
      panel.title = panel.y_label.substr(0, panel.y_label.find(' ')) + " after " + a.method + " pruning";
    }
    viz::Series series{a.labels.empty() ? ck : a.labels[i], {}, {}};
    auto points = nlohmann::json::array();
    for (const auto& p : curve) {
      nlohmann::json point{{"sparsity", p.sparsity}, {"zeros", p.zeros}};
      table << ck << "," << p.sparsity << "," << p.zeros;
      std::cout << ck << "\t" << 100 * p.sparsity << "%" << std::fixed << std::setprecision(2);
      for (const auto& [name, value] : p.scores) {
        point[name] = value;
        table << "," << value;
        std::cout << "\t" << score_title(name) << " " << value;
      }
      std::cout << std::defaultfloat << "\n";
      table << "\n";
      points.push_back(point);
      series.x.push_back(100 * p.sparsity);
      series.y.push_back(p.scores.front().second);
    }
    report["models"].push_back({{"checkpoint", ck}, {"points", points}});
    panel.series.push_back(series);
  }
  io::make_dirs(a.output_dir);
  io::atomic_write_text(a.output_dir + "/prune.json", report.dump(2) + "\n");
  io::atomic_write_text(a.output_dir + "/prune.csv", table.str());
  if (!viz::charts_available()) {
    log::info("wrote " + a.output_dir + "/{prune.json, prune.csv}; no chart: " + viz::no_charts_reason());
    return;
  }
  viz::plot_panels({panel}, a.output_dir + "/prune.png");
  log::info("wrote " + a.output_dir + "/{prune.json, prune.csv, prune.png}");
}
}  // namespace

void add_analyze(CLI::App& app, int& exit_code) {
  auto* analyze = app.add_subcommand("analyze", "analyses of trained models");
  analyze->require_subcommand(1);
  auto a = std::make_shared<AnalyzeArgs>();
  auto* sub = analyze->add_subcommand(
      "attention", "layer-to-layer attention similarity of a Transformer and the SAN blocks it suggests");
  sub->add_option("--checkpoint", a->checkpoint, "a trained Transformer checkpoint")->required();
  sub->add_option("--data", a->data, "prepared data directory (default: the one the checkpoint was trained on)");
  sub->add_option("--split", a->split, "held-out split to run over")->capture_default_str();
  sub->add_option("--max-sentences", a->max_sentences, "sentences to use (0: all)")->capture_default_str();
  sub->add_option("--max-tokens", a->max_tokens, "padded tokens per batch")->capture_default_str();
  sub->add_option("--theta", a->theta, "a layer joins a block while its similarity to the block's first is >= theta")
      ->capture_default_str();
  sub->add_option("--output-dir,-o", a->output_dir, "where similarity.json, groups.yaml, CSVs and heatmaps go")
      ->required();
  sub->add_option("--threads", a->threads, kComputeThreadsHelp);
  sub->callback([a, &exit_code] {
    leanseq::set_compute_threads(a->threads);
    run_attention(*a);
    exit_code = 0;
  });

  auto p = std::make_shared<PruneCurveArgs>();
  auto* prune = analyze->add_subcommand(
      "prune",
      "quality against sparsity: each checkpoint's dense weights pruned to each sparsity (BLEU and chrF of a "
      "translation model, accuracy and macro F1 of a text classifier)");
  prune->add_option("--checkpoint", p->checkpoints, "checkpoint(s) to compare, all of one kind (repeatable)")->required();
  prune->add_option("--label", p->labels, "legend label per checkpoint in prune.png (default: its path)");
  prune->add_option("--src", p->src, "translation models: source sentences (raw text)");
  prune->add_option("--ref", p->ref, "translation models: reference translations (raw text)");
  prune->add_option("--tsv", p->tsv, "text classifiers: labelled TSV (text<TAB>label, or text1<TAB>text2<TAB>label)");
  prune->add_option("--method", p->method, "weight or unit")->capture_default_str();
  prune->add_option("--sparsities", p->sparsities, "comma-separated percentages")->capture_default_str();
  prune->add_option("--beam", p->beam, "translation models: beam size")->capture_default_str();
  prune->add_option("--lenpen", p->lenpen, "translation models: length penalty")->capture_default_str();
  prune->add_option("--max-sentences", p->max_sentences, "sentences (examples) per batch")->capture_default_str();
  prune->add_option("--output-dir,-o", p->output_dir, "where prune.json, prune.csv and prune.png go")->required();
  prune->add_option("--threads", p->threads, kComputeThreadsHelp);
  prune->callback([p, &exit_code] {
    leanseq::set_compute_threads(p->threads);
    run_prune_curve(*p);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
