// `leanseq translate` as a stream: output while a pipe's input is still open, memory bounded by the
// chunk and not by the input, one output line per input line whatever the lines hold (a 1 MB one
// too); and the checkpoints it reads and writes: corrupted records refused, failed writes clean.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "e2e/task.h"
#include "leanseq/data/indexed.h"
#include "leanseq/core/error.h"
#include "leanseq/core/zip.h"
#include "leanseq/runtime/inference.h"

using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

namespace {
const std::string& checkpoint() { return leanseq::test::tiny_checkpoint(); }

size_t count_lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }
}  // namespace

TEST(TranslateStream, APipeGetsItsFirstLinesBeforeTheInputCloses) {
  const auto& ck = checkpoint();
  const auto dir = temp_dir("pipe");
  // Three lines, then 10 s of silence, then two more: the first translations must come out
  // during the silence. Each output line is stamped with the seconds since the pipeline began.
  const std::string script = dir + "/pipe.sh";
  std::ofstream(script) << "start=$(date +%s.%N)\n"
                        << "(printf 'a1 a2\\na3\\na4 a5\\n'; sleep 10; printf 'a6\\na7\\n') | " << kCli
                        << " translate --checkpoint " << ck << " --beam 2 --max-len-b 4 2>/dev/null |"
                        << " while IFS= read -r l; do echo \"$(echo \"$(date +%s.%N) - $start\" | bc) $l\"; done\n";
  std::string out;
  ASSERT_EQ(run_command("bash " + script, out), 0) << out;
  std::istringstream lines(out);
  std::vector<double> at;
  for (std::string l; std::getline(lines, l);) at.push_back(std::stod(l.substr(0, l.find(' '))));
  ASSERT_EQ(at.size(), 5u) << out;
  EXPECT_LT(at[2], 9.0) << "the first three lines waited for the end of the input:\n" << out;
  EXPECT_GE(at[3], 10.0) << out;
}

TEST(TranslateStream, EmptyAndInvalidLinesKeepOneOutputLinePerInputLine) {
  const auto& ck = checkpoint();
  const auto dir = temp_dir("lines");
  std::ofstream(dir + "/in.txt", std::ios::binary) << "a1 a2\n\nbad \xff\xfe\na3\n   \na4";
  std::string out;
  const int rc = run_command(kCli + " translate --checkpoint " + ck + " -i " + dir + "/in.txt -o " + dir +
                                 "/out.txt --beam 2 --max-len-b 4 --buffer-size 2",
                             out);
  ASSERT_EQ(rc, 0) << out;
  const std::string result = read_text(dir + "/out.txt");
  EXPECT_EQ(count_lines(result), 6u) << result;
  std::istringstream in(result);
  std::vector<std::string> got;
  for (std::string l; std::getline(in, l);) got.push_back(l);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_FALSE(got[0].empty());
  EXPECT_TRUE(got[1].empty());
  EXPECT_TRUE(got[2].empty());
  EXPECT_FALSE(got[3].empty());
  EXPECT_FALSE(got[5].empty());
  EXPECT_NE(out.find(dir + "/in.txt:2: empty line"), std::string::npos) << out;
  EXPECT_NE(out.find(dir + "/in.txt:3: invalid UTF-8"), std::string::npos) << out;
  // The same lines one chunk at a time or all at once: the same translations.
  std::string all;
  ASSERT_EQ(run_command("{ " + kCli + " translate --checkpoint " + ck + " -i " + dir + "/in.txt --beam 2 --max-len-b 4 2>/dev/null; }",
                        all),
            0);
  EXPECT_EQ(all, result);
}

TEST(TranslateStream, WorkersGiveOneDecodersTranslations) {
  const auto& ck = checkpoint();
  const auto dir = temp_dir("workers");
  {
    std::ofstream in(dir + "/in.txt"), prefixes(dir + "/prefixes.txt");
    for (int i = 0; i < 40; ++i) {
      for (int k = 0; k <= (i * 7) % 9; ++k) in << (k ? " " : "") << "a" << (i * 3 + k * 5) % 20;
      in << "\n";
      prefixes << "b" << i % 10 << "\n";
    }
  }
  // Chunks of 13 lines, parts of at most 4 (--batch-size) taken by the workers out of order; a
  // prefix per line, the n-best with scores and alignments.
  const std::string flags = " -i " + dir + "/in.txt --prefix-file " + dir +
                            "/prefixes.txt --beam 3 --nbest 2 --max-len-b 6 --buffer-size 13 --batch-size 4 "
                            "--print-scores --print-alignment --threads 2";
  std::string one, two, automatic, log;
  const std::string translate = "{ " + kCli + " translate --checkpoint " + ck;
  ASSERT_EQ(run_command(translate + flags + " --workers 1 2>" + dir + "/log; }", one), 0) << one;
  EXPECT_EQ(read_text(dir + "/log").find("workers of"), std::string::npos) << read_text(dir + "/log");
  ASSERT_EQ(run_command(translate + flags + " --workers 2 2>" + dir + "/log; }", two), 0) << two;
  EXPECT_EQ(count_lines(one), 80u) << one;
  EXPECT_EQ(two, one);
  log = read_text(dir + "/log");
  EXPECT_NE(log.find("2 workers of 1 threads"), std::string::npos) << log;
  EXPECT_NE(log.find("translated 40 sentences"), std::string::npos) << log;
  // The default (auto) on the CPU: a decoder per thread, each with one thread.
  ASSERT_EQ(run_command(translate + flags + " 2>" + dir + "/log; }", automatic), 0) << automatic;
  EXPECT_EQ(automatic, one);
  log = read_text(dir + "/log");
  EXPECT_NE(log.find("2 workers of 1 threads"), std::string::npos) << log;
  // auto runs one decoder where more would not serve: a line at a time, seeded sampling.
  const std::string line_at_a_time = std::regex_replace(flags, std::regex("--buffer-size 13"), "--buffer-size 1");
  for (const std::string& run : {flags + " --interactive", line_at_a_time, flags + " --sampling --seed 3"}) {
    ASSERT_EQ(run_command(translate + run + " 2>" + dir + "/log; }", log), 0) << run << ": " << log;
    log = read_text(dir + "/log");
    EXPECT_EQ(log.find("workers of"), std::string::npos) << run << ": " << log;
  }
  ASSERT_EQ(run_command(kCli + " translate --checkpoint " + ck + " -i " + dir + "/in.txt --workers 1000", log), 2) << log;
  EXPECT_NE(log.find("--workers: 1000 is not between 1 and"), std::string::npos) << log;
  ASSERT_EQ(run_command(kCli + " translate --checkpoint " + ck + " -i " + dir + "/in.txt --workers many", log), 2)
      << log;
  EXPECT_NE(log.find("--workers: 'many': expected auto or a number up to 1024"), std::string::npos) << log;
}

TEST(TranslateStream, MemoryIsBoundedByTheChunkNotTheInput) {
  const auto& ck = checkpoint();
  const auto dir = temp_dir("memory");
  auto write = [&](const std::string& name, int n) {
    std::ofstream f(dir + "/" + name);
    for (int i = 0; i < n; ++i) f << "a" << i % 20 << " a" << (i * 7) % 20 << " a" << (i * 3) % 20 << "\n";
  };
  write("small.txt", 1000);
  write("large.txt", 60000);
  const std::string flags = " --greedy --max-len-b 1 --buffer-size 1000 --batch-size 500 -o /dev/null";
  const auto logs = leanseq::test::expect_bounded_peak(
      kCli + " translate --checkpoint " + ck + " -i " + dir + "/small.txt" + flags,
      kCli + " translate --checkpoint " + ck + " -i " + dir + "/large.txt" + flags, {"1,000 lines", "60,000 lines"}, 64);
  EXPECT_NE(logs.second.find("translated 60000 sentences"), std::string::npos) << logs.second;
}

TEST(TranslateOptions, PrefixNoRepeatNgramSamplingAndAMissingDevice) {
  const auto& ck = checkpoint();
  const auto dir = temp_dir("options");
  std::ofstream(dir + "/in.txt") << "a1 a2 a3\na4 a5\na6 a7 a8 a9\n";
  std::ofstream(dir + "/prefixes.txt") << "b7\nb8 b9\nb1\n";
  std::string out;
  // Every translation starts with the prefix given, one for all or one per line.
  int rc = run_command("{ " + kCli + " translate --checkpoint " + ck + " -i " + dir +
                           "/in.txt --beam 3 --max-len-b 6 --prefix b5 2>/dev/null; }",
                       out);
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  int n = 0;
  for (std::string l; std::getline(lines, l); ++n) EXPECT_EQ(l.rfind("b5", 0), 0u) << l;
  EXPECT_EQ(n, 3);
  rc = run_command("{ " + kCli + " translate --checkpoint " + ck + " -i " + dir + "/in.txt --beam 3 --max-len-b 6 --prefix-file " +
                       dir + "/prefixes.txt 2>/dev/null; }",
                   out);
  ASSERT_EQ(rc, 0) << out;
  std::istringstream per_line(out);
  for (const std::string p : {"b7", "b8 b9", "b1"}) {
    std::string l;
    std::getline(per_line, l);
    EXPECT_EQ(l.rfind(p, 0), 0u) << l << " should start with " << p;
  }
  // No repeated bigram of subword tokens in any hypothesis of the 3-best lists.
  rc = run_command("{ " + kCli + " translate --checkpoint " + ck + " -i " + dir +
                       "/in.txt --beam 3 --nbest 3 --max-len-b 12 --no-repeat-ngram-size 2 --output-format fairseq 2>/dev/null; }",
                   out);
  ASSERT_EQ(rc, 0) << out;
  std::istringstream hyps(out);
  int checked = 0;
  for (std::string l; std::getline(hyps, l);) {
    if (l.rfind("H-", 0) != 0) continue;
    std::istringstream words(l.substr(l.find('\t', l.find('\t') + 1) + 1));
    std::vector<std::string> w{"</s>"};
    for (std::string x; words >> x;) w.push_back(x);
    std::set<std::pair<std::string, std::string>> seen;
    for (size_t i = 0; i + 1 < w.size(); ++i) EXPECT_TRUE(seen.insert({w[i], w[i + 1]}).second) << l;
    ++checked;
  }
  EXPECT_EQ(checked, 9);
  // Sampling: the same seed gives the same samples, another seed others.
  auto sample = [&](int seed) {
    std::string o;
    EXPECT_EQ(run_command("{ " + kCli + " translate --checkpoint " + ck + " -i " + dir +
                              "/in.txt --sampling --beam 4 --nbest 4 --max-len-b 8 --temperature 1.5 --seed " +
                              std::to_string(seed) + " 2>/dev/null; }",
                          o),
              0)
        << o;
    return o;
  };
  EXPECT_EQ(sample(5), sample(5));
  EXPECT_NE(sample(5), sample(6));
  EXPECT_EQ(run_command(kCli + " translate --checkpoint " + ck + " --sampling-topp 0.9 < /dev/null", out), 2) << out;
  // A device that is not there: one line naming it, exit 2.
  rc = run_command("echo a1 | " + kCli + " translate --checkpoint " + ck + " --device cuda:7", out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--device: cuda:7: "), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line: " << out;
  std::ofstream(dir + "/short.txt") << "b1\n";
  rc = run_command(kCli + " translate --checkpoint " + ck + " -i " + dir + "/in.txt --prefix-file " + dir + "/short.txt", out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(dir + "/short.txt: has 1 lines, fewer than the input"), std::string::npos) << out;
}

// One 1 MB line among normal ones made translate allocate 2.9 TB, exit 1 and write nothing: it is
// cut to --max-input-length now, named in a warning, and every line is written.
TEST(TranslateStream, AMegabyteLineIsCutAndEveryLineIsWritten) {
  const auto& ck = checkpoint();
  const auto dir = temp_dir("long-line");
  {
    std::ofstream f(dir + "/in.txt");
    f << "a1 a2\na3 a4\n";
    for (int i = 0; f.tellp() < (1 << 20) + 20; ++i) f << "a" << i % 20 << " ";
    f << "\na5 a6\n";
  }
  std::string out;
  ASSERT_EQ(run_command(kCli + " translate --checkpoint " + ck + " -i " + dir + "/in.txt -o " + dir +
                            "/out.txt --beam 2 --max-len-b 6",
                        out),
            0)
      << out.substr(0, 2000);
  EXPECT_NE(out.find(dir + "/in.txt:3: longer than --max-input-length 1024 subword tokens"), std::string::npos) << out;
  const std::string result = read_text(dir + "/out.txt");
  ASSERT_EQ(count_lines(result), 4u) << result;
  std::istringstream in(result);
  for (std::string l; std::getline(in, l);) EXPECT_FALSE(l.empty()) << result;
}

// A byte changed inside a weight: the record's CRC32 differs, and the checkpoint is refused naming
// the record (it used to translate, wrongly, with exit 0).
TEST(Checkpoints, ACorruptedRecordIsRefusedByName) {
  const auto& ck = checkpoint();
  const auto dir = temp_dir("corrupt");
  std::string bytes = read_text(ck);
  // The largest record is a weight matrix; a byte in its middle changes one float.
  leanseq::zip::Reader reader(ck);
  std::string name;
  leanseq::zip::Record largest;
  for (const auto& [n, r] : reader.records()) {
    if (r.method == 0 && r.size > largest.size) name = n, largest = r;
  }
  ASSERT_GT(largest.size, 1000u);
  bytes[largest.offset + largest.size / 2] ^= 0x10;
  std::ofstream(dir + "/bad.pt", std::ios::binary) << bytes;
  std::string out;
  EXPECT_EQ(run_command("echo a1 a2 | " + kCli + " translate --checkpoint " + dir + "/bad.pt", out), 1) << out;
  EXPECT_NE(out.find("record " + name + " is corrupted"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

// A write that fails (here the file-size limit, as a full disk would): one line, exit 1, no
// temporary left, the old file untouched. Temporaries of dead processes go at the next save.
TEST(Checkpoints, AFailedWriteLeavesNothingAndStaleTemporariesAreRemoved) {
  const auto& ck = checkpoint();
  const auto dir = temp_dir("full");
  std::ofstream(dir + "/q.pt") << "old";
  std::string out;
  // SIGXFSZ ignored: a write past the limit fails with EFBIG instead of killing the process.
  EXPECT_EQ(run_command("trap '' XFSZ; ulimit -f 8; " + kCli + " quantize --checkpoint " + ck + " --out " + dir + "/q.pt",
                        out),
            1)
      << out;
  EXPECT_NE(out.find(dir + "/q.pt: not written:"), std::string::npos) << out;
  EXPECT_NE(out.find("File too large"), std::string::npos) << out;
  EXPECT_EQ(read_text(dir + "/q.pt"), "old");
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
  // A temporary of a process that no longer exists, and one of a live process (this one).
  const std::string dead = dir + "/checkpoint_3.pt.tmp.4194300.0";
  const std::string live = dir + "/checkpoint_4.pt.tmp." + std::to_string(getpid()) + ".0";
  const std::string users = dir + "/notes.tmp.4194300";  // not a name leanseq makes: left alone
  std::ofstream(dead) << "x";
  std::ofstream(live) << "x";
  std::ofstream(users) << "x";
  ASSERT_EQ(run_command(kCli + " quantize --checkpoint " + ck + " --out " + dir + "/q.pt", out), 0) << out;
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(users));
}

// A SentencePiece record that is no model (its CRC32 right): refused naming the checkpoint, and
// the private directory the model went through is gone (a 251 KB file leaked per attempt).
TEST(Checkpoints, AnUnloadableSentencePieceModelLeavesNoTemporaryFile) {
  const auto dir = temp_dir("bad-spm");
  const auto ck = leanseq::checkpoint::read_checkpoint(checkpoint());
  const auto loaded = leanseq::checkpoint::load_model(ck, checkpoint());
  auto vocab = ck.vocab;
  vocab.src_spm = vocab.tgt_spm = "not a SentencePiece model";
  leanseq::checkpoint::save_checkpoint(dir + "/bad.pt", ck.config_yaml, vocab, ck.progress, *loaded.model, nullptr);
  const std::string tmp = dir + "/tmp";
  std::filesystem::create_directories(tmp);
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before ? before : "";
  setenv("TMPDIR", tmp.c_str(), 1);
  try {
    leanseq::runtime::load_translator(dir + "/bad.pt");
    ADD_FAILURE() << "loaded";
  } catch (const leanseq::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/bad.pt: its SentencePiece model cannot be loaded"), std::string::npos)
        << e.what();
  }
  if (before) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  EXPECT_TRUE(std::filesystem::is_empty(tmp));
}

// Options out of their range end with one line naming the option and exit 2 (--threads 100000
// used to hang).
TEST(TranslateOptions, OutOfRangeOptionsAreNamedWithExitCode2) {
  const auto& ck = checkpoint();
  for (const auto& [flag, named] : std::vector<std::pair<std::string, std::string>>{
           {"--threads 100000", "threads: 100000 is more than"},
           {"--threads -3", "threads: -3 is negative"},
           {"--beam 0", "beam: expected an integer in [1, 1024], got 0"},
           {"--lenpen nan", "lenpen: expected a finite number in [-1e+06, 1e+06], got nan"},
           {"--max-input-length -1", "max_input_length: expected an integer in [0, 1e+09], got -1"},
           {"--sampling --sampling-topk -5", "sampling_topk: expected an integer in [1, 1e+09] or -1 (off), got -5"}}) {
    std::string out;
    EXPECT_EQ(run_command("echo a1 | " + kCli + " translate --checkpoint " + ck + " " + flag, out), 2) << flag << ": " << out;
    EXPECT_NE(out.find(named), std::string::npos) << flag << ": " << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << flag << ": " << out;
  }
}
