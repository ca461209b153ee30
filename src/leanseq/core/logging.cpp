#include "leanseq/core/logging.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>

namespace leanseq::log {
namespace {
std::mutex mu;
Level threshold = Level::info;
std::string prefix;

// "2026-11-22 22:38:27 | info | message" on stderr (stdout carries only results: translations,
// scores, JSON); the level is coloured when stderr is a terminal.
void write(Level level, const char* name, const char* colour, const std::string& msg) {
  if (level < threshold) return;
  static const bool tty = isatty(2);
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << stamp << " | " << (tty ? colour : "") << name << (tty ? "\033[0m" : "") << " | " << prefix << msg << "\n";
}
}  // namespace

void set_level(Level level) {
  std::lock_guard<std::mutex> lock(mu);
  threshold = level;
}
void set_prefix(const std::string& p) {
  std::lock_guard<std::mutex> lock(mu);
  prefix = p;
}
void info(const std::string& msg) { write(Level::info, "info", "\033[32m", msg); }
void warn(const std::string& msg) { write(Level::warn, "warning", "\033[33m", msg); }
void error(const std::string& msg) { write(Level::error, "error", "\033[31m", msg); }
void debug(const std::string& msg) { write(Level::debug, "debug", "\033[36m", msg); }

}  // namespace leanseq::log
