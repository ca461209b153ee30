#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/viz/plot.h"

namespace leanseq::cli {

namespace {
struct Curves {
  viz::Series train_loss, valid_loss, valid_bleu;
};

Curves read_log(const std::string& path, const std::string& x_key, const std::string& label) {
  Curves c;
  c.train_loss.name = c.valid_loss.name = c.valid_bleu.name = label;
  auto lines = io::read_lines(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(lines[i]);
    } catch (const std::exception&) {
      throw DataError(path + ":" + std::to_string(i + 1) + ": not a JSON record (expected a leanseq train_log.jsonl)");
    }
    if (!j.contains(x_key) || !j.contains("type")) continue;
    double x = j[x_key].get<double>();
    if (j["type"] == "train") {
      c.train_loss.x.push_back(x), c.train_loss.y.push_back(j["loss"]);
    } else if (j["type"] == "valid") {
      c.valid_loss.x.push_back(x), c.valid_loss.y.push_back(j["loss"]);
      if (j.contains("bleu")) c.valid_bleu.x.push_back(x), c.valid_bleu.y.push_back(j["bleu"]);
    }
  }
  return c;
}
}  // namespace

void plot_training_logs(const std::vector<std::string>& logs, const std::vector<std::string>& labels,
                        const std::string& x, const std::string& output) {
  if (x != "minutes" && x != "update") throw ConfigError("--x must be minutes or update");
  viz::Panel loss{"Validation loss", x, "loss (base 2)", {}}, bleu{"Validation BLEU", x, "BLEU", {}},
      train{"Training loss", x, "loss (base 2)", {}};
  for (size_t i = 0; i < logs.size(); ++i) {
    std::string label =
        i < labels.size() ? labels[i] : std::filesystem::path(logs[i]).parent_path().filename().string();
    auto c = read_log(logs[i], x, label.empty() ? logs[i] : label);
    loss.series.push_back(c.valid_loss);
    train.series.push_back(c.train_loss);
    if (!c.valid_bleu.x.empty()) bleu.series.push_back(c.valid_bleu);
  }
  std::vector<viz::Panel> panels{loss};
  if (!bleu.series.empty()) panels.push_back(bleu);
  panels.push_back(train);
  viz::plot_panels(panels, output);
}

void add_plot(CLI::App& app, int& exit_code) {
  auto logs = std::make_shared<std::vector<std::string>>();
  auto labels = std::make_shared<std::vector<std::string>>();
  auto output = std::make_shared<std::string>();
  auto x = std::make_shared<std::string>("minutes");
  auto* sub = app.add_subcommand("plot", "learning curves from training logs (train_log.jsonl) as PNG or SVG");
  sub->add_option("--log", *logs, "training log(s): <save_dir>/train_log.jsonl")->required()->expected(1, -1);
  sub->add_option("--label", *labels, "legend label per log (default: the log's directory name)");
  sub->add_option("--output,-o", *output, "image file (.png or .svg)")->required();
  sub->add_option("--x", *x, "x axis: minutes or update")->capture_default_str();
  sub->callback([=, &exit_code] {
    plot_training_logs(*logs, *labels, *x, *output);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
