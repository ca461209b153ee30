#include "leanseq/core/progress.h"

#include <unistd.h>

#include <cstdio>

#include "leanseq/core/logging.h"

namespace leanseq {

namespace {
std::string duration_text(double s) {
  char buf[48];
  if (s < 90) {
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  } else if (s < 5400) {
    std::snprintf(buf, sizeof buf, "%.0f min %02.0f s", static_cast<double>(static_cast<int64_t>(s) / 60),
                  static_cast<double>(static_cast<int64_t>(s) % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  }
  return buf;
}
}  // namespace

bool stderr_is_terminal() { return isatty(2) != 0; }

Progress::Progress(std::string what, uint64_t total, std::string unit, bool terminal, double log_every_s)
    : what_(std::move(what)), unit_(std::move(unit)), total_(total), terminal_(terminal), log_every_s_(log_every_s) {}

std::string Progress::text(uint64_t done, double seconds, const std::string& extra) const {
  const bool bytes = unit_.empty();
  auto amount = [&](uint64_t n) {
    char buf[32];
    if (bytes) {
      std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(n) / 1e6);
    } else {
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
    }
    return std::string(buf);
  };
  std::string s = what_ + ": ";
  char buf[64];
  if (total_ > 0) {
    std::snprintf(buf, sizeof buf, "%.0f%% (", 100.0 * static_cast<double>(done) / static_cast<double>(total_));
    s += buf + amount(done) + " of " + amount(total_) + (bytes ? "" : " " + unit_) + ")";
  } else {
    s += amount(done) + (bytes ? "" : " " + unit_);
  }
  if (seconds > 0 && done > 0) {
    const double rate = static_cast<double>(done) / seconds;
    if (bytes) {
      std::snprintf(buf, sizeof buf, ", %.1f MB/s", rate / 1e6);
    } else {
      std::snprintf(buf, sizeof buf, ", %.0f %s/s", rate, unit_.c_str());
    }
    s += buf;
    if (total_ > done) s += ", " + duration_text(static_cast<double>(total_ - done) / rate) + " left";
  }
  if (!extra.empty()) s += ", " + extra;
  return s;
}

void Progress::update(uint64_t done, const std::string& extra) {
  const double now = clock_.seconds();
  if (terminal_) {
    if (last_print_ >= 0 && now - last_print_ < 0.2) return;
    std::fprintf(stderr, "\r%s   ", text(done, now, extra).c_str());
    std::fflush(stderr);
    open_ = true;
  } else {
    if (now - (last_print_ < 0 ? 0 : last_print_) < log_every_s_) return;
    log::info(text(done, now, extra));
  }
  last_print_ = now;
}

void Progress::finish() {
  if (open_) std::fprintf(stderr, "\n");
  open_ = false;
}

}  // namespace leanseq
