// Labelled TSV files for classification: headers, pairs, labels and the errors that name file:line.
#include <gtest/gtest.h>

#include "leanseq/data/text_classification.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
std::string scratch_file(const std::string& name, const std::string& text) {
  static const std::string dir = test::temp_dir("tsv");
  return test::write_text(dir + "/" + name, text);
}

}  // namespace

TEST(TextClassificationData, ReadsSingleTextsWithAHeaderAndPairsWithout) {
  auto single = data::read_text_tsv(scratch_file("a.tsv", "sentence\tlabel\nit 's good \t1\n\nbad  film\t0\n"), std::nullopt, true);
  EXPECT_FALSE(single.pair);
  EXPECT_TRUE(single.labelled);
  ASSERT_EQ(single.examples.size(), 2u);
  EXPECT_EQ(single.examples[0].first, (std::vector<std::string>{"it", "'s", "good"}));
  EXPECT_EQ(single.examples[0].line, 2);
  EXPECT_EQ(single.examples[1].label, "0");
  EXPECT_EQ(single.examples[1].line, 4);

  auto pairs = data::read_text_tsv(scratch_file("p.tsv", "a b\tc\tyes\nd\te f\tno\n"), std::nullopt, true);
  EXPECT_TRUE(pairs.pair);
  EXPECT_EQ(pairs.examples[1].second, (std::vector<std::string>{"e", "f"}));
  EXPECT_EQ(data::collect_labels(pairs), (std::vector<std::string>{"no", "yes"}));

  // With the model's shape known, a missing label column means unlabelled input.
  auto unlabelled = data::read_text_tsv(scratch_file("u.tsv", "good film\nbad\n"), false, std::nullopt);
  EXPECT_FALSE(unlabelled.labelled);
  auto labelled = data::read_text_tsv(scratch_file("l.tsv", "good film\t1\n"), false, std::nullopt);
  EXPECT_TRUE(labelled.labelled);
}

TEST(TextClassificationData, ErrorsNameTheFileAndLine) {
  auto bad_cols = scratch_file("c.tsv", "good\t1\nbad\t0\textra\n");
  auto msg = test::data_error_of([&] { data::read_text_tsv(bad_cols, std::nullopt, true); });
  EXPECT_NE(msg.find(bad_cols + ":2: expected 2"), std::string::npos) << msg;
  auto empty_text = scratch_file("e.tsv", "good\t1\n \t0\n");
  msg = test::data_error_of([&] { data::read_text_tsv(empty_text, std::nullopt, true); });
  EXPECT_NE(msg.find(empty_text + ":2: empty text"), std::string::npos) << msg;
  auto utf8 = scratch_file("x.tsv", "good\t1\nb\xff" "ad\t0\n");
  msg = test::data_error_of([&] { data::read_text_tsv(utf8, std::nullopt, true); });
  EXPECT_NE(msg.find(utf8 + ":2"), std::string::npos) << msg;
  msg = test::data_error_of([&] { data::read_text_tsv(scratch_file("h.tsv", "sentence\tlabel\n"), std::nullopt, true); });
  EXPECT_NE(msg.find("no examples"), std::string::npos) << msg;
  auto wrong_shape = scratch_file("w.tsv", "a\tb\tc\n");
  msg = test::data_error_of([&] { data::read_text_tsv(wrong_shape, false, true); });
  EXPECT_NE(msg.find(wrong_shape + ":1: expected 2 tab-separated column(s) (text, label) but found 3"), std::string::npos)
      << msg;

  auto train = data::read_text_tsv(scratch_file("t.tsv", "good\tpos\nbad\tneg\n"), std::nullopt, true);
  auto dict = data::build_word_dictionary(train, 1);
  auto other = scratch_file("o.tsv", "fine\tpos\nmeh\tneutral\n");
  auto valid = data::read_text_tsv(other, std::nullopt, true);
  msg = test::data_error_of([&] { data::encode_text(valid, dict, data::collect_labels(train)); });
  EXPECT_NE(msg.find(other + ":2: label 'neutral' is not one of the training labels (neg, pos)"), std::string::npos)
      << msg;
}

TEST(TextClassificationData, EncodesUnknownWordsAndPadsBatches) {
  auto train = data::read_text_tsv(scratch_file("t2.tsv", "a b a\t1\nb c\t0\n"), std::nullopt, true);
  auto dict = data::build_word_dictionary(train, 2);  // c is seen once: <unk>
  auto enc = data::encode_text(train, dict, data::collect_labels(train));
  EXPECT_EQ(enc.first[1][1], data::Dictionary::kUnk);
  EXPECT_EQ(enc.labels, (std::vector<int64_t>{1, 0}));
  auto batch = data::collate_text(enc, {1, 0});
  EXPECT_EQ(batch.tokens.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(batch.tokens[0][2].item<int64_t>(), data::Dictionary::kPad);
  EXPECT_EQ(batch.labels[0].item<int64_t>(), 0);
}
