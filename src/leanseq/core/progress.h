// A progress line for long passes over a file or a known count: on a terminal, one line on stderr
// rewritten in place (what, percent done, rate, time left); elsewhere (a log file) a log line at
// most every `log_every_s` seconds, so long runs in batch jobs still say where they are.
#pragma once
#include <cstdint>
#include <string>

#include "leanseq/core/timer.h"

namespace leanseq {

class Progress {
 public:
  // `total`: what done() counts up to (bytes, lines; 0 when unknown: no percent, no ETA).
  // `unit`: what is counted, for the rate ("lines", "" for bytes, which are shown in MB).
  Progress(std::string what, uint64_t total, std::string unit, bool terminal, double log_every_s = 60);
  // Where the pass is; cheap to call often (it prints at most every 0.2 s on a terminal).
  void update(uint64_t done, const std::string& extra = "");
  // Ends the terminal line (a newline after the last update), once.
  void finish();
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // The text of one report (no newline): e.g. "encoding train: 45% (1350000 of 3000000 lines),
  // 41000 lines/s, 40 s left"; public for tests.
  std::string text(uint64_t done, double seconds, const std::string& extra) const;

 private:
  std::string what_, unit_;
  uint64_t total_ = 0;
  bool terminal_ = false, open_ = false;
  double log_every_s_ = 60, last_print_ = -1;
  Timer clock_;
};

// Whether stderr is a terminal (progress lines are shown there).
bool stderr_is_terminal();

}  // namespace leanseq
