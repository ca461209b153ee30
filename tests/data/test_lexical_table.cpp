// The lexical table of a vocabulary shortlist on a corpus small enough to know its answer: "a"
// is always translated by "x", "b" by "y", "c" by "z".
#include <gtest/gtest.h>

#include "leanseq/data/lexical_table.h"

using leanseq::data::LexicalMethod;

TEST(LexicalTable, FindsEachWordsTranslationByIbm1AndByCooccurrence) {
  // ids: a=4 b=5 c=6 on the source side; x=4 y=5 z=6 on the target side; </s> = 2 is left out.
  const std::vector<std::vector<int32_t>> src = {{4, 5, 2}, {4, 6, 2}, {4, 2}, {5, 6, 2}, {6, 2}};
  const std::vector<std::vector<int32_t>> tgt = {{4, 5, 2}, {4, 6, 2}, {4, 2}, {5, 6, 2}, {6, 2}};
  for (auto method : {LexicalMethod::ibm1, LexicalMethod::cooccurrence}) {
    const auto t = leanseq::data::build_lexical_table(src, tgt, 7, 7, method, 2, 2);
    for (int32_t s : {4, 5, 6}) {
      ASSERT_FALSE(t.best[static_cast<size_t>(s)].empty());
      EXPECT_EQ(t.best[static_cast<size_t>(s)].front().first, s) << static_cast<int>(method) << " source " << s;
      EXPECT_LE(t.best[static_cast<size_t>(s)].size(), 2u);
    }
    EXPECT_TRUE(t.best[2].empty());  // special ids have no entry
    EXPECT_EQ(t.frequent.size(), 2u);
  }
  // IBM model 1 is surer than co-occurrence of what "b" means ("y" is its only unexplained word).
  const auto ibm = leanseq::data::build_lexical_table(src, tgt, 7, 7, LexicalMethod::ibm1, 3, 0, 10);
  EXPECT_GT(ibm.best[5].front().second, 0.6f);
  EXPECT_TRUE(ibm.frequent.empty());
}
