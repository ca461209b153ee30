#include <gtest/gtest.h>

#include <limits>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include "leanseq/core/error.h"
#include "leanseq/data/batching.h"
#include "leanseq/data/bible.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/prepare.h"
#include "leanseq/data/spm.h"
#include "support/fixtures.h"

using namespace leanseq;
using namespace leanseq::data;

// A symbol listed twice adds its counts, saturating at int64's bounds either way.
TEST(Dictionary, RepeatedCountsSaturate) {
  Dictionary d;
  d.add("a", -9000000000000000000);
  d.add("a", -9000000000000000000);
  d.add("b", 9000000000000000000);
  d.add("b", 9000000000000000000);
  EXPECT_EQ(d.count(d.index("a")), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(d.count(d.index("b")), std::numeric_limits<int64_t>::max());
  d.add("b", -1);
  EXPECT_EQ(d.count(d.index("b")), std::numeric_limits<int64_t>::max() - 1);
}

// A dict.txt that lists a symbol twice is refused, as fairseq refuses it (merging would shift every
// later id against fairseq's), unless the line carries fairseq's #fairseq:overwrite flag: then the
// symbol gets a new id, the one its uses map to.
TEST(Dictionary, AFileListingASymbolTwiceIsRefusedUnlessItsLineSaysOverwrite) {
  EXPECT_NE(test::data_error_of([] { Dictionary::parse("a 1\nb 2\na 3\n", "dict.txt"); })
                .find("dict.txt:3: 'a' is listed twice (as fairseq, a repeated symbol needs the flag #fairseq:overwrite)"),
            std::string::npos);
  EXPECT_NE(test::data_error_of([] { Dictionary::parse("<unk> 1\n", "dict.txt"); }).find("dict.txt:1: '<unk>' is listed twice"),
            std::string::npos);
  const auto d = Dictionary::parse("a 1\nb 2\na 3 #fairseq:overwrite\n<unk> 0 #fairseq:overwrite  \n", "dict.txt");
  EXPECT_EQ(d.size(), 8);
  EXPECT_EQ(d.index("a"), 6);
  EXPECT_EQ(d.count(6), 3);
  EXPECT_EQ(d.index("b"), 5);
  EXPECT_EQ(d.index("<unk>"), 7);
  EXPECT_EQ(d.symbol(4), "a");
  EXPECT_NE(test::data_error_of([] { Dictionary::parse("a #fairseq:overwrite\n", "dict.txt"); }).find("dict.txt:1: expected"),
            std::string::npos);
}

TEST(Dictionary, FairseqSpecialsAndFrequencyOrder) {
  Dictionary d;
  EXPECT_EQ(d.index("<s>"), 0);
  EXPECT_EQ(d.index("<pad>"), 1);
  EXPECT_EQ(d.index("</s>"), 2);
  EXPECT_EQ(d.index("<unk>"), 3);
  d.add("b", 1);
  d.add("a", 5);
  d.add("c", 5);
  d.finalize(1, -1, 8);
  EXPECT_EQ(d.symbol(4), "a");
  EXPECT_EQ(d.symbol(5), "c");
  EXPECT_EQ(d.symbol(6), "b");
  EXPECT_EQ(d.size(), 8);
  EXPECT_EQ(d.index("zzz"), Dictionary::kUnk);
  auto dir = test::temp_dir("dict");
  d.save(dir + "/dict.txt");
  auto e = Dictionary::load(dir + "/dict.txt");
  EXPECT_EQ(e.size(), d.size());
  EXPECT_EQ(e.index("c"), 5);
  std::ofstream(dir + "/bad.txt") << "a 1\nnocount\n";
  try {
    Dictionary::load(dir + "/bad.txt");
    FAIL();
  } catch (const DataError& err) {
    EXPECT_NE(std::string(err.what()).find("bad.txt:2:"), std::string::npos) << err.what();
  }
}

namespace {
// Two sentences, [5 6 2] and [7 2], saved as <dir>/x.
std::string two_sentences(const std::string& tag) {
  auto dir = test::temp_dir(tag);
  IndexedWriter w;
  w.add({5, 6, 2});
  w.add({7, 2});
  w.save(dir + "/x");
  return dir;
}
}  // namespace

TEST(Indexed, RoundTripAndTruncationIsDetected) {
  const auto dir = two_sentences("idx");
  IndexedDataset ds(dir + "/x");
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds.get(0), (std::vector<int64_t>{5, 6, 2}));
  EXPECT_EQ(ds.length(1), 2);
  std::filesystem::resize_file(dir + "/x.bin", 8);
  EXPECT_THROW(IndexedDataset(dir + "/x"), DataError);
}

// A forged header or offsets: refused by name before anything is allocated from them or read
// through them (a count of 2^60 asked for 8 EiB; a decreasing offset read before the data).
TEST(Indexed, ForgedHeadersAndOffsetsAreRefused) {
  const auto dir = two_sentences("idx-forged");
  const std::string good = test::read_text(dir + "/x.idx");
  auto forged = [&](size_t at, int64_t v) {
    std::string bytes = good;
    std::memcpy(&bytes[at], &v, 8);
    std::ofstream(dir + "/x.idx", std::ios::binary | std::ios::trunc) << bytes;
  };
  auto expect_refused = [&](const std::string& reason) {
    try {
      IndexedDataset ds(dir + "/x");
      ADD_FAILURE() << "read; expected: " << reason;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  };
  forged(8, int64_t{1} << 60);  // the sentence count
  expect_refused("the file holds 3 offsets");
  forged(8, -1);
  expect_refused("its header says -1 sentences");
  forged(16, 4);  // the first offset
  expect_refused("the first offset is not 0");
  forged(24, 9);  // offset 1 past offset 2 (5)
  expect_refused("offset 2 is smaller than the one before");
}

TEST(Batching, TokenBudgetAndShapes) {
  std::vector<std::pair<int64_t, int64_t>> lengths;
  for (int i = 0; i < 100; ++i) lengths.push_back({1 + i % 17, 1 + (i * 7) % 13});
  BatchingOptions opt;
  opt.max_tokens = 64;
  auto batches = batch_by_size(lengths, opt);
  size_t total = 0;
  for (const auto& b : batches) {
    int64_t mx = 0;
    for (auto i : b) mx = std::max({mx, lengths[i].first, lengths[i].second});
    EXPECT_LE(mx * static_cast<int64_t>(b.size()), 64);
    total += b.size();
  }
  EXPECT_EQ(total, 100u);
  auto batch = collate({{4, 5, 2}, {6, 2}}, {{7, 2}, {8, 9, 10, 2}}, {0, 1});
  EXPECT_EQ(batch.src.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(batch.src[1][2].item<int64_t>(), Dictionary::kPad);
  EXPECT_EQ(batch.prev_output[1][0].item<int64_t>(), Dictionary::kEos);
  EXPECT_EQ(batch.prev_output[1][1].item<int64_t>(), 8);
  EXPECT_EQ(batch.target[0][2].item<int64_t>(), Dictionary::kPad);
  EXPECT_EQ(batch.ntokens, 6);
}

TEST(Batching, GridCellBudgetAndLengthLimits) {
  std::vector<std::pair<int64_t, int64_t>> lengths;
  for (int i = 0; i < 200; ++i) lengths.push_back({2 + i % 23, 2 + (i * 5) % 19});
  BatchingOptions opt;
  opt.max_tokens = 1 << 20;
  opt.max_cells = 600;
  opt.max_source_len = 20;
  opt.max_target_len = 18;
  size_t total = 0;
  for (const auto& b : batch_by_size(lengths, opt)) {
    int64_t src = 0, tgt = 0;
    for (auto i : b) {
      EXPECT_FALSE(opt.too_long(lengths[i]));
      src = std::max(src, lengths[i].first), tgt = std::max(tgt, lengths[i].second);
    }
    EXPECT_LE(static_cast<int64_t>(b.size()) * src * tgt, 600);
    total += b.size();
  }
  size_t within = 0;
  for (const auto& l : lengths) within += l.first <= 20 && l.second <= 18;
  EXPECT_EQ(total, within);
  EXPECT_LT(within, lengths.size());
  EXPECT_EQ(first_too_long(lengths, opt), 11);  // {13, 19}: the target is over the limit
}

TEST(Batching, PaddingCountsThePositionsBeyondEachPairsLength) {
  // lengths {src, tgt}: batch {0, 1} pads source 3 -> 5 (2 positions) and target 4 -> 4 (none);
  // batch {2} pads nothing.
  const std::vector<std::pair<int64_t, int64_t>> lengths{{3, 4}, {5, 2}, {6, 6}};
  const auto p = padding_of({{0, 1}, {2}}, lengths);
  EXPECT_EQ(p.src_tokens, 14);
  EXPECT_EQ(p.src_positions, 16);
  EXPECT_EQ(p.tgt_tokens, 12);
  EXPECT_EQ(p.tgt_positions, 14);
  EXPECT_DOUBLE_EQ(p.src_fraction(), 2.0 / 16);
  EXPECT_DOUBLE_EQ(p.tgt_fraction(), 2.0 / 14);
  EXPECT_DOUBLE_EQ(padding_of({}, lengths).src_fraction(), 0.0);
  // Sorted batches of similar lengths pad less than the same pairs in their given order.
  std::vector<std::pair<int64_t, int64_t>> many;
  for (int i = 0; i < 400; ++i) many.push_back({2 + (i * 13) % 37, 2 + (i * 7) % 29});
  BatchingOptions opt;
  opt.max_tokens = 256;
  const auto sorted = padding_of(batch_by_size(many, opt), many);
  std::vector<std::vector<int64_t>> in_order(50);  // 8 consecutive pairs each
  for (int64_t i = 0; i < 400; ++i) in_order[i / 8].push_back(i);
  EXPECT_LT(sorted.tgt_fraction(), 0.02);
  EXPECT_LT(sorted.src_fraction(), padding_of(in_order, many).src_fraction());
}

namespace {
std::string synthetic(int n, int seed, bool reverse) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> w;
    for (int k = 0; k < 3 + (i + seed) % 5; ++k) w.push_back("w" + std::to_string((i * 7 + k * 3 + seed) % 23));
    if (reverse) std::reverse(w.begin(), w.end());
    for (size_t k = 0; k < w.size(); ++k) out += (k ? " " : "") + w[k];
    out += "\n";
  }
  return out;
}
}  // namespace

TEST(Prepare, EndToEndAndBadInputs) {
  auto dir = test::temp_dir("prep");
  test::write_text(dir + "/train.xx", synthetic(300, 0, false));
  test::write_text(dir + "/train.yy", synthetic(300, 0, true));
  test::write_text(dir + "/valid.xx", synthetic(20, 1, false));
  test::write_text(dir + "/valid.yy", synthetic(20, 1, true));
  PrepareOptions opt;
  opt.src_lang = "xx", opt.tgt_lang = "yy";
  opt.train = dir + "/train", opt.valid = dir + "/valid";
  opt.out_dir = dir + "/bin";
  opt.vocab_size = 40;
  auto rep = prepare(opt);
  ASSERT_EQ(rep.splits.size(), 2u);
  EXPECT_EQ(rep.splits[0].kept, 300);
  auto meta = load_prepared(opt.out_dir);
  PairDataset ds(meta.split_prefix("train", "xx"), meta.split_prefix("train", "yy"));
  EXPECT_EQ(ds.size(), 300u);
  EXPECT_FALSE(std::filesystem::exists(opt.out_dir + "/.prepare-tmp"));

  auto expect_error = [&](const std::string& needle) {
    auto o = opt;
    o.out_dir = dir + "/bad";
    try {
      prepare(o);
      FAIL() << "expected an error containing " << needle;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    // Nothing half-written.
    EXPECT_FALSE(std::filesystem::exists(dir + "/bad/meta.yaml"));
    EXPECT_FALSE(std::filesystem::exists(dir + "/bad/train.xx.bin"));
  };
  test::write_text(dir + "/valid.yy", synthetic(19, 1, true));
  expect_error("valid.xx has 20 lines but " + dir + "/valid.yy has 19");
  test::write_text(dir + "/valid.yy", "");
  expect_error("valid.yy: file is empty");
  test::write_text(dir + "/valid.yy", synthetic(19, 1, true) + "caf\xc3\x28\n");
  expect_error("valid.yy:20: invalid UTF-8");
  std::filesystem::remove(dir + "/valid.yy");
  expect_error("valid.yy: file not found");
}

TEST(Bible, OsisCleaning) {
  EXPECT_EQ(osis_to_text("<w lemma=\"x\">In</w> <w>the</w> beginning, <w>God</w><note placement=\"foot\">"
                         "<reference>1:1</reference>The word</note><w>created</w>."),
            "In the beginning, God created.");
  EXPECT_EQ(osis_to_text("<title type=\"x\">Heading</title><w>A</w><w>B</w> &amp; C"), "A B & C");
  EXPECT_EQ(osis_to_text("<title canonical=\"true\" type=\"psalm\">A Psalm.</title> Text"), "A Psalm. Text");
  auto v = parse_imp("$$$Genesis 1:0\n<chapter/>\n$$$Genesis 1:1\n<w>EN el</w> <w>principio</w>.\n");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v["Genesis 1:1"], "EN el principio.");
}

// A model file the helper cannot load is one clear error naming the file, and the failed
// constructor leaves no pipe open and no child behind (no destructor runs after a throw).
TEST(SentencePieceHelper, AModelItCannotLoadLeavesNoPipeOrChildBehind) {
  const auto dir = test::temp_dir("spm_bad");
  { std::ofstream(dir + "/bad.model") << "not a SentencePiece model\n"; }
  auto open_files = [] {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  const int before = open_files();
  for (int i = 0; i < 3; ++i) {
    try {
      SentencePiece bad(dir + "/bad.model");
      ADD_FAILURE() << "a bad model loaded";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.model"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(open_files(), before) << "pipes left open";
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a helper was left unreaped";
  EXPECT_EQ(errno, ECHILD);
}

// Two models' helper processes alive at once: the first one closes (its helper exits) while the
// second lives, in either order. A helper that inherited another's pipes kept it waiting forever.
TEST(SentencePieceHelper, ClosingOneModelWhileAnotherLivesReturns) {
  const auto dir = test::temp_dir("spm_two");
  {
    std::ofstream text(dir + "/text.txt");
    for (int i = 0; i < 200; ++i) text << "the quick brown fox " << i << " jumps over the lazy dog\n";
  }
  SpmTrainOptions opt;
  opt.vocab_size = 40;
  SentencePiece::train({dir + "/text.txt"}, dir + "/m", opt);
  auto first = std::make_unique<SentencePiece>(dir + "/m.model");
  auto second = std::make_unique<SentencePiece>(dir + "/m.model");
  auto closing = std::async(std::launch::async, [&] { first.reset(); });
  EXPECT_EQ(closing.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "the first helper never exited";
  EXPECT_EQ(second->decode(second->encode("the lazy fox")), "the lazy fox");
  second.reset();  // (were the first still waiting, this would let it finish)
  closing.wait();
}
