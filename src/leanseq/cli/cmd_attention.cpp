// `leanseq attention`: translates one sentence and draws the encoder attention of the translation
// (the attention the model returns: fconv's averaged over its attention layers, the last decoder
// layer's for the Transformer and LightConv) as a heatmap, target pieces down, source pieces across.
#include <iostream>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/runtime/inference.h"
#include "leanseq/viz/plot.h"

namespace leanseq::cli {

void add_attention(CLI::App& app, int& exit_code) {
  struct Args {
    std::string checkpoint, source, output;
    int64_t beam = decode::SearchOptions{}.beam;
  };
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("attention", "translate one sentence and draw its encoder attention (PNG or SVG)");
  sub->add_option("--checkpoint", a->checkpoint, "checkpoint file")->required();
  sub->add_option("--source", a->source, "the source sentence")->required();
  sub->add_option("--output,-o", a->output, "image file (.png or .svg)")->required();
  sub->add_option("--beam", a->beam, "beam size")->capture_default_str();
  sub->callback([a, &exit_code] {
    if (io::utf8_invalid_offset(a->source) >= 0) throw DataError("--source: invalid UTF-8");
    auto lt = runtime::load_translator(a->checkpoint);
    decode::TranslateOptions opt;
    opt.search.beam = a->beam;
    auto res = lt.translator->translate({a->source}, opt);
    if (res.empty() || res[0].empty()) throw DataError("--source: no translation");
    const auto& best = res[0][0];
    // Teacher-forced pass over the translation: the same attention the search saw, step by step.
    auto src_ids = lt.translator->encode_source(a->source);
    std::vector<int64_t> prev{data::Dictionary::kEos};
    prev.insert(prev.end(), best.hyp.tokens.begin(), best.hyp.tokens.end() - 1);
    torch::NoGradGuard no_grad;
    auto& model = *lt.loaded.model;
    model.eval();
    auto src = torch::tensor(src_ids).unsqueeze(0);
    auto enc = model.encode(src, torch::tensor({static_cast<int64_t>(src_ids.size())}));
    auto out = model.decode(torch::tensor(prev).unsqueeze(0), enc, true);
    if (!out.attn.defined()) throw ConfigError(a->checkpoint + ": this model has no encoder attention to draw");
    auto attn = out.attn[0].to(torch::kDouble).contiguous();  // [T, S]
    viz::Heatmap h;
    h.title = best.text;
    h.col_labels = lt.translator->source_pieces(a->source);
    h.col_labels.push_back("</s>");
    h.row_labels = best.pieces;
    h.row_labels.push_back("</s>");
    for (int64_t t = 0; t < attn.size(0); ++t) {
      auto row = attn[t];
      h.values.emplace_back(row.data_ptr<double>(), row.data_ptr<double>() + row.numel());
    }
    viz::plot_heatmap(h, a->output);
    std::cout << best.text << "\n";
    log::info("wrote " + a->output + " (" + std::to_string(h.row_labels.size()) + " target x " +
              std::to_string(h.col_labels.size()) + " source pieces)");
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
