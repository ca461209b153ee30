// Timestamped log lines on stderr, filtered by level (thread-safe).
#pragma once
#include <string>

namespace leanseq::log {

enum class Level { debug, info, warn, error };

void set_level(Level level);
// Text put before every message (e.g. "rank 1: " in a distributed run).
void set_prefix(const std::string& prefix);
void info(const std::string& msg);
void warn(const std::string& msg);
void error(const std::string& msg);
void debug(const std::string& msg);

}  // namespace leanseq::log
