#include "leanseq/core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace leanseq::log {
namespace {
spdlog::logger& logger() {
  // Logs go to stderr so that stdout carries only results (translations, scores, JSON).
  static auto instance = [] {
    auto l = spdlog::stderr_color_mt("leanseq");
    l->set_pattern("%Y-%m-%d %H:%M:%S | %^%l%$ | %v");
    return l;
  }();
  return *instance;
}
}  // namespace

void set_level(Level level) {
  static const spdlog::level::level_enum map[] = {spdlog::level::debug, spdlog::level::info,
                                                  spdlog::level::warn, spdlog::level::err};
  logger().set_level(map[static_cast<int>(level)]);
}
void info(const std::string& msg) { logger().info(msg); }
void warn(const std::string& msg) { logger().warn(msg); }
void error(const std::string& msg) { logger().error(msg); }
void debug(const std::string& msg) { logger().debug(msg); }

}  // namespace leanseq::log
