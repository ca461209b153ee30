// io::LineReader on hostile input: a line longer than the bound is cut at a character boundary
// and the rest of it skipped (a 1 GB line without a newline would have been held whole, and
// searched again for '\n' at every read), and the lines after it come out as they were.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "leanseq/core/io.h"
#include "leanseq/core/line_reader.h"
#include "support/fixtures.h"

using leanseq::io::LineReader;

TEST(LineReader, CutsLinesPastTheBoundAtACharacterAndKeepsTheRest) {
  const std::string path = leanseq::test::temp_dir("lines") + "/in.txt";
  std::string huge;
  while (huge.size() < 300000) huge += "ab\xc3\xa9 ";  // "abé " : the cut falls inside the é
  {
    std::ofstream f(path, std::ios::binary);
    f << "first\n" << huge << "\nthird\r\n" << huge;  // the last line has no newline
  }
  LineReader in(path, 1001);
  std::string line;
  ASSERT_TRUE(in.next(line));
  EXPECT_EQ(line, "first");
  EXPECT_FALSE(in.cut());
  ASSERT_TRUE(in.next(line));
  EXPECT_TRUE(in.cut());
  EXPECT_LE(line.size(), 1001u);
  EXPECT_GE(line.size(), 998u);
  EXPECT_EQ(huge.compare(0, line.size(), line), 0);
  EXPECT_LT(leanseq::io::utf8_invalid_offset(line), 0) << "cut inside a character";
  ASSERT_TRUE(in.next(line));
  EXPECT_EQ(line, "third");
  EXPECT_FALSE(in.cut());
  ASSERT_TRUE(in.next(line));
  EXPECT_TRUE(in.cut());
  EXPECT_FALSE(in.next(line));
}

// One 80 MB line with the default bound (1 MiB): cut, and the next line read.
TEST(LineReader, TheDefaultBoundCutsAnEightyMegabyteLine) {
  const std::string path = leanseq::test::temp_dir("huge-line") + "/in.txt";
  {
    std::ofstream f(path, std::ios::binary);
    const std::string block(1 << 20, 'x');
    for (int i = 0; i < 80; ++i) f << block;
    f << "\nafter\n";
  }
  LineReader in(path);
  std::string line;
  ASSERT_TRUE(in.next(line));
  EXPECT_EQ(line.size(), LineReader::kMaxLineBytes);
  ASSERT_TRUE(in.next(line));
  EXPECT_EQ(line, "after");
}
