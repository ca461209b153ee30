// Subcommands of the leanseq executable. Each add_* registers its options and a callback that
// stores the process exit code in `exit_code`.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "leanseq/checkpoint/run_config.h"

namespace leanseq::cli {

// The command line the executable was started with (set by main), for commands that start
// copies of themselves (`train --nproc`).
void set_program_args(int argc, char** argv);
const std::vector<std::string>& program_args();

void add_prepare(CLI::App& app, int& exit_code);
void add_train(CLI::App& app, int& exit_code);
void add_translate(CLI::App& app, int& exit_code);
void add_score(CLI::App& app, int& exit_code);
void add_average(CLI::App& app, int& exit_code);
void add_quantize(CLI::App& app, int& exit_code);
void add_list_archs(CLI::App& app, int& exit_code);
void add_plot(CLI::App& app, int& exit_code);
void add_quickstart(CLI::App& app, int& exit_code);
void add_eval_lm(CLI::App& app, int& exit_code);
void add_attention(CLI::App& app, int& exit_code);
void add_analyze(CLI::App& app, int& exit_code);
void add_classify(CLI::App& app, int& exit_code);
void add_prune(CLI::App& app, int& exit_code);
void add_import_fairseq(CLI::App& app, int& exit_code);
void add_import_ctranslate2(CLI::App& app, int& exit_code);
void add_tokenize(CLI::App& app, int& exit_code);
void add_shortlist(CLI::App& app, int& exit_code);
void add_serve(CLI::App& app, int& exit_code);
void add_fairseq_interactive(CLI::App& app, int& exit_code);
void add_fairseq_generate(CLI::App& app, int& exit_code);
void add_fairseq_train(CLI::App& app, int& exit_code);
void add_fairseq_eval_lm(CLI::App& app, int& exit_code);
void add_fairseq_validate(CLI::App& app, int& exit_code);
void add_fairseq_preprocess(CLI::App& app, int& exit_code);
void add_fairseq_score(CLI::App& app, int& exit_code);

// Trains a translation model or language model to the end (or a signal) and logs its speed; the
// process exit code (128 + the signal when one stopped it). `train` and `fairseq-train` run it.
int train_seq2seq(const checkpoint::RunConfig& cfg, bool resume);

// Learning curves (validation loss, validation BLEU where logged, training loss) of training logs
// (train_log.jsonl) against `x` ("minutes" or "update"), one series per log, as a PNG or SVG
// (`leanseq plot`, and the quick start's curve).
void plot_training_logs(const std::vector<std::string>& logs, const std::vector<std::string>& labels,
                        const std::string& x, const std::string& output);

}  // namespace leanseq::cli
