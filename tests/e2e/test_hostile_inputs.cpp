// What a hostile or careless command line once did, each now one line and an exit code: devices and
// directories named as files (read forever, or as empty), a glossary whose regular expression
// recursed per character (SIGSEGV), YAML aliases that named billions of keys, training values
// outside their range or not finite (a NaN checkpoint), meta.yaml paths leaving their directory,
// unknown BPE codes versions, unbounded error lines, and a beam wider than the vocabulary.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "e2e/task.h"
#include "leanseq/core/strings.h"

using leanseq::test::kCli;
using leanseq::test::run_command;
using leanseq::test::temp_dir;
using leanseq::test::tiny_checkpoint;

namespace {

// Runs `cmd`, expecting exit code `rc` within 30 s and `expected` in its one line of output.
void expect_refused(std::string cmd, int rc, const std::string& expected) {
  SCOPED_TRACE(cmd.substr(0, 200));
  // A reader that never ends is stopped (exit 124), and so fails rather than hangs the suite.
  leanseq::replace_all(cmd, kCli + " ", "timeout 60 " + kCli + " ");
  std::string out;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run_command(cmd, out), rc) << out.substr(0, 2000);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
  EXPECT_NE(out.find(expected), std::string::npos) << out.substr(0, 2000);
  EXPECT_LT(out.size(), 1500u) << "more than one bounded line";
}

}  // namespace

TEST(HostileInputs, DevicesAndDirectoriesAreNotReadAsFiles) {
  const auto dir = temp_dir("hostile-files");
  const std::string translate = "echo a1 a2 | " + kCli + " translate --checkpoint " + tiny_checkpoint();
  for (const std::string& path : {std::string("/dev/zero"), dir}) {
    const std::string what = path == dir ? "is a directory, not a file" : "is a device, not a file";
    expect_refused(translate + " --replace-unk " + path, 1, path + ": " + what);
    expect_refused(translate + " --prefix-file " + path, 1, path + ": " + what);
    expect_refused(translate + " --shortlist " + path, 1, path + ": " + what);
    expect_refused("echo a | " + kCli + " tokenize -l en --bpe-codes " + path, 1, path + ": " + what);
    expect_refused("echo a | " + kCli + " tokenize -l en --nonbreaking-prefixes " + path, 1, path + ": " + what);
    expect_refused(kCli + " serve --checkpoint " + tiny_checkpoint() + " --port 0 --api-keys " + path, 2,
                   path + ": " + what);
    expect_refused(kCli + " train --data " + dir + " -c " + path, 2, path + ": " + what);
  }
  // /dev/null is an empty file, as it always was: an empty --replace-unk dictionary.
  std::string out;
  EXPECT_EQ(run_command(translate + " --replace-unk /dev/null", out), 0) << out;
}

TEST(HostileInputs, AGlossaryOnALongWordDoesNotRecursePerCharacter) {
  const auto dir = temp_dir("hostile-glossary");
  std::ofstream(dir + "/codes") << "#version: 0.2\na a\naa aa\n";
  std::string out;
  const int rc = run_command("python3 -c \"print('a' * 30000)\" | " + kCli + " tokenize -l en --bpe-codes " + dir +
                                 "/codes --glossaries 'a+' 'b(a|b)*c'",
                             out);
  ASSERT_EQ(rc, 0) << out.substr(0, 500);
  EXPECT_EQ(out, std::string(30000, 'a') + "\n");  // the glossary matches the whole word: kept
  // Cut out of a word, as subword-nmt isolates glossaries.
  EXPECT_EQ(run_command("echo xaaay | " + kCli + " tokenize -l en --bpe-codes " + dir + "/codes --glossaries 'a+'", out), 0);
  EXPECT_EQ(out, "x@@ aaa@@ y\n");
  expect_refused("echo a | " + kCli + " tokenize -l en --bpe-codes " + dir + "/codes --glossaries '(a'", 2,
                 "glossary '(a': not a regular expression");
}

TEST(HostileInputs, YamlAliasesAreExpandedUnderABound) {
  const auto dir = temp_dir("hostile-yaml");
  // 24 levels, each a list of 8 aliases of the one before: 8^24 leaves from 1.4 KB.
  std::ofstream yaml(dir + "/bomb.yaml");
  yaml << "l0: &l0 {a: 1, b: 2}\n";
  for (int i = 1; i <= 24; ++i) {
    yaml << "l" << i << ": &l" << i << " {";
    for (int j = 0; j < 8; ++j) yaml << (j ? ", " : "") << "k" << j << ": *l" << i - 1;
    yaml << "}\n";
  }
  yaml.close();
  expect_refused(kCli + " train --data " + dir + " -c " + dir + "/bomb.yaml", 2,
                 dir + "/bomb.yaml: more than 100000 keys or 32 levels once its aliases are expanded");
}

TEST(HostileInputs, TrainingValuesOutsideTheirRangeExit2NamingTheKey) {
  const auto dir = temp_dir("hostile-values");
  const std::string train = kCli + " train --arch transformer_tiny --data " + dir + " --set ";
  for (const auto& [set, expected] : std::vector<std::pair<std::string, std::string>>{
           {"optim.lr=inf", "key 'optim.lr': expected a finite number > 0, got 'inf'"},
           {"optim.lr=nan", "key 'optim.lr': expected a finite number > 0, got 'nan'"},
           {"criterion.label_smoothing=nan", "key 'criterion.label_smoothing': expected a finite number in [0, 1)"},
           {"model.dropout=2", "key 'model.dropout': expected a finite number in [0, 1], got '2'"},
           {"optim.clip_norm=nan", "key 'optim.clip_norm'"},
           {"optim.warmup_init_lr=nan", "key 'optim.warmup_init_lr'"},
           {"stop.max_minutes=nan", "key 'stop.max_minutes'"},
           {"optim.warmup_updates=-5", "key 'optim.warmup_updates': expected an integer >= 0, got '-5'"},
           {"model.max_source_positions=0", "key 'model.max_source_positions': expected an integer >= 1"}}) {
    expect_refused(train + set, 2, expected);
  }
  // The flags go through the same check.
  expect_refused(kCli + " train --arch transformer_tiny --data " + dir + " --max-minutes nan", 2, "key 'stop.max_minutes'");
  // An error quoting a user's value says at most a bounded part of it.
  std::ofstream(dir + "/big.yaml") << "arch: " << std::string(3 << 20, 'x') << "\n";
  expect_refused(kCli + " train --data " + dir + " -c " + dir + "/big.yaml", 2, "unknown arch 'xxx");
}

TEST(HostileInputs, PreparedDataAndCodesFilesAreChecked) {
  const auto dir = temp_dir("hostile-meta");
  std::filesystem::create_directories(dir + "/bin");
  std::ofstream(dir + "/bin/meta.yaml") << "src_lang: de\ntgt_lang: en\nsrc_spm: ../../../../../../dev/zero\ntgt_spm: spm.model\n";
  expect_refused(kCli + " train --arch transformer_tiny --data " + dir + "/bin", 1,
                 "src_spm '../../../../../../dev/zero' must name a file inside the directory");
  std::ofstream(dir + "/codes") << "#version: 9.9\na b\n";
  expect_refused("echo ab | " + kCli + " tokenize -l en --bpe-codes " + dir + "/codes", 1,
                 dir + "/codes:1: BPE codes of version '9.9'");
  std::ofstream(dir + "/codes-utf8") << "#version: 0.2\na \xff\n";
  expect_refused("echo ab | " + kCli + " tokenize -l en --bpe-codes " + dir + "/codes-utf8", 1,
                 dir + "/codes-utf8:2: invalid UTF-8");
}

TEST(HostileInputs, ABeamWiderThanTheVocabularyAndABadPrefix) {
  std::string out;
  // As fairseq: the beam is narrowed to the vocabulary (less one).
  EXPECT_EQ(run_command("echo a1 a2 | " + kCli + " translate --checkpoint " + tiny_checkpoint() + " --beam 1000 --nbest 1000",
                        out),
            0)
      << out.substr(0, 1000);
  expect_refused("echo a1 | " + kCli + " translate --checkpoint " + tiny_checkpoint() + " --prefix \"$(printf 'b\\377')\"", 2,
                 "prefix: expected UTF-8 text, got bytes that are not UTF-8");
}
