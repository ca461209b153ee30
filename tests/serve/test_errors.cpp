// A 500's answer carries an id, never the failure's text (a backtrace with code addresses helps an
// attacker past ASLR); the log has the text under the same id.
#include <gtest/gtest.h>

#include "leanseq/serve/request.h"

using leanseq::serve::internal_error;

TEST(ServeErrors, AnInternalErrorAnswersAnIdAndLogsTheDetail) {
  const std::string detail = "translation failed: selected index k out of range\nframe #0: c10::Error (0x7f3a2c10beef in libc10.so)";
  testing::internal::CaptureStderr();
  const auto first = internal_error(detail);
  const auto second = internal_error("another");
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(first.status, 500);
  EXPECT_EQ(first.message.find("0x"), std::string::npos) << first.message;
  EXPECT_EQ(first.message.find("out of range"), std::string::npos) << first.message;
  EXPECT_NE(first.message, second.message) << "each failure has its own id";
  const std::string id = first.message.substr(first.message.find("internal error ") + 15, 16);
  EXPECT_NE(log.find("internal error " + id.substr(0, id.find(' ')) + ": translation failed"), std::string::npos) << log;
  EXPECT_NE(log.find("0x7f3a2c10beef"), std::string::npos) << log;
  // A failure's text invalid as UTF-8 still makes a JSON answer.
  EXPECT_NO_THROW(leanseq::serve::json_text({{"error", std::string("\xff\xfe")}}));
}
