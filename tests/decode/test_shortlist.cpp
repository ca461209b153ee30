// Vocabulary shortlists: the file (CTranslate2's vmap format) and its errors, the tokens a batch
// may use, and the search over them in every family: a shortlist of the whole vocabulary changes
// nothing, and a smaller one gives each step the full output layer's logits of its tokens (the
// incremental state's gathered rows, also after the beams are reordered).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "leanseq/core/error.h"
#include "leanseq/data/batching.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/decode/beam_search.h"
#include "leanseq/decode/shortlist.h"
#include "leanseq/models/registry.h"
#include "leanseq/nn/output_rows.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {

data::Dictionary target_dict() {
  data::Dictionary d;
  for (const char* w : {"the", "dog", "cat", "runs", "house", "red"}) d.add(w);  // ids 4..9
  return d;
}

std::vector<int64_t> ids_of(const torch::Tensor& t) { return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()}; }

const std::vector<std::string> kPresets{"transformer_tiny", "transformer_tiny_san_aan", "lightconv_tiny",
                                        "dynamicconv_tiny", "fconv_tiny", "pervasive_tiny"};

}  // namespace

TEST(Shortlist, ReadsCTranslate2sVmapAndGivesABatchsTokens) {
  const auto dir = test::temp_dir("shortlist");
  std::ofstream(dir + "/vmap.txt") << "\tthe\nHund\tdog\nrote Haus\tred house\nKatze\tcat unknownword\n\n";
  const auto s = decode::Shortlist::read(dir + "/vmap.txt", target_dict());
  EXPECT_EQ(s.entries(), 3);
  EXPECT_EQ(s.skipped(), 1);
  // Specials, "the", then what the sources' unigrams and bigrams allow, and the extra tokens.
  EXPECT_EQ(ids_of(s.ids_for({{"Hund", "läuft"}}, {})), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(ids_of(s.ids_for({{"das", "rote", "Haus"}, {"Katze"}}, {7})), (std::vector<int64_t>{0, 1, 2, 3, 4, 6, 7, 8, 9}));
  EXPECT_EQ(ids_of(s.ids_for({{"rote"}}, {})), (std::vector<int64_t>{0, 1, 2, 3, 4}));  // "rote" alone: no rule
}

TEST(Shortlist, ABadFileIsNamedWithItsLine) {
  const auto dir = test::temp_dir("shortlist-bad");
  std::ofstream(dir + "/bad.txt") << "\tthe\nHund dog\n";
  try {
    decode::Shortlist::read(dir + "/bad.txt", target_dict());
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/bad.txt:2: a shortlist line is source subwords, a tab and target subwords"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(decode::Shortlist::read(dir + "/absent.txt", target_dict()), DataError);
}

TEST(Shortlist, TheWholeVocabularyChangesNothingInEveryFamily) {
  const int64_t vocab = 40;
  std::vector<std::vector<int64_t>> sources = {{5, 9, 13, 2}, {7, 21, 30, 8, 11, 2}, {33, 2}};
  auto batch = data::collate(sources, {}, {0, 1, 2});
  decode::SearchOptions opt;
  opt.beam = 4;
  opt.nbest = 2;
  opt.max_len_b = 8;
  for (const auto& preset : kPresets) {
    torch::manual_seed(5);
    auto model = models::build_model(*models::registry().preset_config(preset), {vocab, vocab, true});
    model->eval();
    const auto full = decode::generate({model.get()}, batch.src, batch.src_lengths, vocab, opt);
    const auto all = decode::generate({model.get()}, batch.src, batch.src_lengths, vocab, opt, nullptr, nullptr,
                                      torch::arange(vocab));
    for (size_t i = 0; i < sources.size(); ++i) {
      ASSERT_EQ(all[i].size(), full[i].size()) << preset;
      for (size_t k = 0; k < full[i].size(); ++k) {
        EXPECT_EQ(all[i][k].tokens, full[i][k].tokens) << preset << " sentence " << i;
        EXPECT_NEAR(all[i][k].score, full[i][k].score, 1e-6) << preset << " sentence " << i;
      }
    }
    // A smaller list: every token comes from it.
    const auto some = torch::tensor(std::vector<int64_t>{0, 1, 2, 3, 6, 11, 17, 25, 31, 39});
    const auto restricted = decode::generate({model.get()}, batch.src, batch.src_lengths, vocab, opt, nullptr, nullptr, some);
    const auto allowed = ids_of(some);
    for (const auto& hyps : restricted) {
      ASSERT_FALSE(hyps.empty()) << preset;
      for (const auto& h : hyps) {
        for (int64_t t : h.tokens) EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << preset;
      }
    }
  }
}

TEST(Shortlist, EachStepGivesTheFullLayersLogitsOfItsTokensThroughReorders) {
  const int64_t vocab = 40;
  const auto rows = torch::tensor(std::vector<int64_t>{0, 1, 2, 3, 8, 9, 20, 33});
  for (const auto& preset : kPresets) {
    torch::manual_seed(7);
    auto model = models::build_model(*models::registry().preset_config(preset), {vocab, vocab, true});
    model->eval();
    torch::NoGradGuard no_grad;
    auto src = torch::tensor(std::vector<int64_t>{5, 9, 13, 2, 7, 21, 30, 2}).view({2, 4});
    auto lengths = torch::tensor(std::vector<int64_t>{4, 4});
    auto enc_full = model->encode(src, lengths), enc_rows = model->encode(src, lengths);
    auto full = model->init_state(enc_full), part = model->init_state(enc_rows);
    part.output_rows = std::make_shared<nn::OutputRows>();
    part.output_rows->ids = rows;
    auto tokens = torch::tensor(std::vector<int64_t>{2, 2}).view({2, 1});
    for (int step = 0; step < 4; ++step) {
      const auto a = model->step(tokens, enc_full, full, false).logits.index_select(-1, rows);
      const auto b = model->step(tokens, enc_rows, part, false).logits;
      EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << preset << " step " << step;
      const auto order = torch::tensor(std::vector<int64_t>{1, 0});  // swap the rows
      model->reorder(enc_full, full, order, false);
      model->reorder(enc_rows, part, order, false);
      tokens = torch::tensor(std::vector<int64_t>{8 + step, 20}).view({2, 1});
    }
  }
}
