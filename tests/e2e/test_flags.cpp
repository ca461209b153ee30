// The command line's spellings: no short flag means two things across commands, fairseq's names
// are aliases of the native ones where they mean the same (translate --path/--unkpen, prepare's
// -s/-t/--trainpref/--destdir, train's --lr/--dropout/--adam-betas/...), and a fairseq value the
// flag cannot take is named.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "e2e/task.h"

using leanseq::test::kCli;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

TEST(Flags, NoShortFlagHasTwoMeanings) {
  std::string out;
  ASSERT_EQ(run_command(kCli + " --help", out), 0) << out;
  std::vector<std::string> commands;
  std::istringstream top(out);
  bool in_list = false;
  for (std::string line; std::getline(top, line);) {
    if (line.rfind("Subcommands:", 0) == 0) in_list = true;
    std::smatch m;
    if (in_list && std::regex_search(line, m, std::regex("^  ([a-z][a-z-]+) "))) commands.push_back(m[1]);
  }
  ASSERT_GE(commands.size(), 15u) << out;
  // "-s,--src,--source-lang TEXT" (CLI11 prints the short name first): each short name with the
  // long names it goes with, in every command and every command's own subcommands. Two uses of a
  // short name mean the same when they share a long name (aliases); -o is where the output goes, a
  // file (--output) or a directory (--output-dir): one meaning.
  struct Use {
    std::string command;
    std::set<std::string> names;
  };
  std::map<std::string, std::vector<Use>> uses;
  const std::regex option("^  (-[a-zA-Z]),((--[a-z-]+,?)+)"), nested("^  ([a-z][a-z-]+) "), name("--[a-z-]+");
  for (size_t k = 0; k < commands.size(); ++k) {
    const auto c = commands[k];
    // fairseq-score takes fairseq-score's own spellings, which fairseq gives other meanings than in
    // its other commands (-s its system output, -o its n-gram order): scripts run unchanged.
    if (c == "fairseq-score") continue;
    ASSERT_EQ(run_command(kCli + " " + c + " --help", out), 0) << c << ": " << out;
    std::istringstream help(out);
    bool subcommands = false;
    for (std::string line; std::getline(help, line);) {
      std::smatch m;
      if (line.rfind("Subcommands:", 0) == 0) subcommands = true;
      if (subcommands && std::regex_search(line, m, nested)) commands.push_back(c + " " + std::string(m[1]));
      if (!std::regex_search(line, m, option) || m[1] == "-h") continue;
      Use use{c, {}};
      const std::string longs = m[2];
      for (auto it = std::sregex_iterator(longs.begin(), longs.end(), name); it != std::sregex_iterator(); ++it) {
        use.names.insert(it->str() == "--output-dir" ? "--output" : it->str());
      }
      uses[m[1]].push_back(use);
    }
  }
  ASSERT_FALSE(uses.empty());
  for (const auto& [flag, list] : uses) {
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        bool shared = false;
        for (const auto& n : list[i].names) shared = shared || list[j].names.count(n) > 0;
        EXPECT_TRUE(shared) << flag << " means " << *list[i].names.begin() << " in " << list[i].command << " but "
                            << *list[j].names.begin() << " in " << list[j].command;
      }
    }
  }
}

TEST(Flags, FairseqSpellingsSetTheSameKeys) {
  std::string out;
  ASSERT_EQ(run_command(kCli + " train --list-keys --arch transformer_tiny --lr 7e-4 --dropout 0.3 --adam-betas "
                               "'(0.9, 0.997)' --stop-time-hours 1.5 --max-tokens 3000 --no-epoch-checkpoints "
                               "--warmup-updates 123 --label-smoothing 0.2 --clip-norm 0.5",
                        out),
            0)
      << out;
  for (const char* row : {"| `optim.lr` | float | `0.0007` |", "| `model.dropout` | float | `0.3` |",
                          "| `optim.adam_beta2` | float | `0.997` |", "| `stop.max_minutes` | float | `90` |",
                          "| `batch.max_tokens` | int | `3000` |", "| `checkpoint.no_epoch_checkpoints` | bool | `true` |",
                          "| `optim.warmup_updates` | int | `123` |", "| `criterion.label_smoothing` | float | `0.2` |",
                          "| `optim.clip_norm` | float | `0.5` |"}) {
    EXPECT_NE(out.find(row), std::string::npos) << row << "\n" << out;
  }
  EXPECT_EQ(run_command(kCli + " train --arch transformer_tiny --data x --adam-betas 0.9,0.98", out), 2);
  EXPECT_NE(out.find("--adam-betas: expected '(beta1, beta2)'"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " train --arch transformer_tiny --data x --lr fast", out), 2);
  EXPECT_NE(out.find("--lr: key 'optim.lr': expected a finite number > 0"), std::string::npos) << out;

  // prepare with fairseq-preprocess's names, translate with fairseq-interactive's.
  const auto dir = temp_dir("flags");
  leanseq::test::write_task_splits(dir);
  ASSERT_EQ(run_command(kCli + " prepare -s src -t tgt --trainpref " + dir + "/train --validpref " + dir +
                            "/valid --destdir " + dir + "/bin --vocab-size 60",
                        out),
            0)
      << out;
  EXPECT_NE(out.find("wrote " + dir + "/bin"), std::string::npos) << out;
  std::ofstream(dir + "/in.txt") << "a1 a2\n";
  std::string a, b;
  const std::string ck = leanseq::test::tiny_checkpoint();
  ASSERT_EQ(run_command("{ " + kCli + " translate --path " + ck + " -i " + dir + "/in.txt --unkpen 2 2>/dev/null; }", a), 0)
      << a;
  ASSERT_EQ(run_command("{ " + kCli + " translate --checkpoint " + ck + " -i " + dir +
                            "/in.txt --unk-penalty 2 2>/dev/null; }",
                        b),
            0)
      << b;
  EXPECT_EQ(a, b);
}
