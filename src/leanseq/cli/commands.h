// Subcommands of the leanseq executable. Each add_* registers its options and a callback that
// stores the process exit code in `exit_code`.
#pragma once
#include <CLI/CLI.hpp>

namespace leanseq::cli {

void add_prepare(CLI::App& app, int& exit_code);
void add_train(CLI::App& app, int& exit_code);
void add_translate(CLI::App& app, int& exit_code);
void add_score(CLI::App& app, int& exit_code);
void add_average(CLI::App& app, int& exit_code);
void add_list_archs(CLI::App& app, int& exit_code);
void add_plot(CLI::App& app, int& exit_code);
void add_quickstart(CLI::App& app, int& exit_code);
void add_eval_lm(CLI::App& app, int& exit_code);
void add_attention(CLI::App& app, int& exit_code);
void add_analyze(CLI::App& app, int& exit_code);

}  // namespace leanseq::cli
