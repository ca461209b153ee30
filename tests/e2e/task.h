// The synthetic tasks of the end-to-end tests: translation (written and prepared through the CLI)
// and sentiment classification.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <utility>
#include <regex>
#include <string>
#include <vector>

#include "support/fixtures.h"

namespace leanseq::test {

inline const std::string kCli = cli_path();

// A learnable synthetic task: word-by-word substitution with a fixed reordering of adjacent pairs.
inline void write_task(const std::string& prefix, int n, int seed) {
  std::ofstream s(prefix + ".src"), t(prefix + ".tgt");
  uint32_t x = 12345u + static_cast<uint32_t>(seed);
  for (int i = 0; i < n; ++i) {
    int len = 3 + static_cast<int>((x >> 8) % 6);
    std::vector<int> w;
    for (int k = 0; k < len; ++k) {
      x = x * 1664525u + 1013904223u;
      w.push_back(static_cast<int>((x >> 16) % 20));
    }
    for (int k = 0; k < len; ++k) s << (k ? " " : "") << "a" << w[k];
    for (int k = 0; k < len; ++k) t << (k ? " " : "") << "b" << w[k];
    s << "\n", t << "\n";
  }
}

// dir/{train,valid,test}.{src,tgt}: 2000, 50 and 100 pairs of the task.
inline void write_task_splits(const std::string& dir) {
  write_task(dir + "/train", 2000, 1);
  write_task(dir + "/valid", 50, 2);
  write_task(dir + "/test", 100, 3);
}

inline std::string prepare_task(const std::string& dir) {
  write_task_splits(dir);
  std::string out;
  int rc = run_command(kCli + " prepare --src src --tgt tgt --train " + dir + "/train --valid " + dir + "/valid --test " +
                           dir + "/test --out " + dir + "/bin --vocab-size 60",
                       out);
  EXPECT_EQ(rc, 0) << out;
  return dir + "/bin";
}

// Sentences of filler words with one sentiment word; with `pairs`, the label says whether two
// sentences agree.
inline void write_sentiment(const std::string& path, int n, uint32_t seed, bool pairs = false) {
  const char* pos[] = {"good", "great", "fine", "lovely"};
  const char* neg[] = {"bad", "awful", "poor", "dull"};
  std::ofstream f(path);
  f << (pairs ? "s1\ts2\tlabel\n" : "sentence\tlabel\n");
  uint32_t x = seed * 2654435761u + 1;
  auto next = [&x] { return (x = x * 1664525u + 1013904223u) >> 8; };
  auto sentence = [&](bool positive) {
    std::string s;
    const auto len = 2 + next() % 5, at = next() % len;
    for (uint32_t k = 0; k < len; ++k) {
      s += k ? " " : "";
      s += k == at ? (positive ? pos[next() % 4] : neg[next() % 4]) : "w" + std::to_string(next() % 30);
    }
    return s;
  };
  for (int i = 0; i < n; ++i) {
    const bool a = next() % 2, b = next() % 2;
    if (pairs) {
      f << sentence(a) << "\t" << sentence(b) << "\t" << (a == b ? "same" : "different") << "\n";
    } else {
      f << sentence(a) << " \t" << (a ? 1 : 0) << "\n";
    }
  }
}

// The "peak memory N MiB" a command logged (prepare, translate), or -1.
inline double peak_mib(const std::string& log) {
  std::smatch m;
  const std::regex re("peak memory ([0-9]+) MiB");
  return std::regex_search(log, m, re) ? std::stod(m[1]) : -1;
}

// Runs a command on a small input and on a large one, both of which log their peak memory, and
// expects the large one's to stay within `growth_mib` of the small one's (`what` names the inputs
// in the messages: {"1,000 lines", "60,000 lines"}). Returns the two logs.
inline std::pair<std::string, std::string> expect_bounded_peak(const std::string& small_cmd, const std::string& large_cmd,
                                                               const std::pair<std::string, std::string>& what,
                                                               double growth_mib) {
  std::pair<std::string, std::string> logs;
  EXPECT_EQ(run_command(small_cmd, logs.first), 0) << logs.first;
  EXPECT_EQ(run_command(large_cmd, logs.second), 0) << logs.second;
  const double a = peak_mib(logs.first), b = peak_mib(logs.second);
  EXPECT_GT(a, 0) << logs.first;
  EXPECT_GT(b, 0) << logs.second;
  std::cout << "peak memory: " << what.first << " " << a << " MiB, " << what.second << " " << b << " MiB\n";
  EXPECT_LT(b - a, growth_mib) << what.first << ": " << a << " MiB, " << what.second << ": " << b << " MiB";
  return logs;
}

// A transformer_tiny checkpoint trained for 30 updates on the task (once per test program).
inline const std::string& tiny_checkpoint() {
  static const std::string path = [] {
    const auto dir = temp_dir("tiny");
    const auto data = prepare_task(dir);
    std::string out;
    const int rc = run_command(kCli + " train --arch transformer_tiny --data " + data + " --save-dir " + dir +
                                   "/ck --max-update 30 --seed 1 --set batch.max_tokens=1000 --set optim.lr=0.003",
                               out);
    EXPECT_EQ(rc, 0) << out;
    return dir + "/ck/checkpoint_last.pt";
  }();
  return path;
}

}  // namespace leanseq::test
