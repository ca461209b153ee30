#include "leanseq/data/spm.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "leanseq/core/error.h"
#include "leanseq/core/strings.h"

namespace leanseq::data {

std::string spm_helper_path() {
  if (const char* env = std::getenv("LEANSEQ_SPM_HELPER"); env && *env) return env;
  // Where the helper lies relative to the code that runs it: the executable (the build tree's
  // leanseq, its tests in build/tests, an installed bin/leanseq) or the shared object holding this
  // function (an installed libleanseq.so, the Python module in build/python/leanseq or in its
  // installed package).
  std::vector<std::filesystem::path> dirs;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&spm_helper_path), &info) != 0 && info.dli_fname &&
      info.dli_fname[0] == '/') {
    dirs.push_back(std::filesystem::path(info.dli_fname).parent_path());
  }
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(exe.parent_path());
  std::vector<std::filesystem::path> looked;
  for (const auto& dir : dirs) {
    for (const char* rel : {"leanseq-spm", "../leanseq-spm", "../../leanseq-spm", LEANSEQ_SPM_HELPER_FROM_BIN,
                            LEANSEQ_SPM_HELPER_FROM_LIB}) {
      const auto p = (dir / rel).lexically_normal();
      if (std::find(looked.begin(), looked.end(), p) != looked.end()) continue;
      if (std::filesystem::is_regular_file(p, ec)) return p.string();
      looked.push_back(p);
    }
  }
  std::string where;
  for (const auto& p : looked) where += (where.empty() ? "" : ", ") + p.string();
  throw Error("the SentencePiece helper leanseq-spm was not found (looked for " + where +
              "); set LEANSEQ_SPM_HELPER to its path");
}

namespace {
// The helper's pipes are read and written with the system calls themselves, resumed after a signal:
// a handler installed without SA_RESTART (Python's are) makes them fail with EINTR, which stdio's
// streams took for the helper's end.
bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void wait_for(pid_t pid, int& status) {
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}
}  // namespace

SentencePiece::SentencePiece(const std::string& model_path) : path_(model_path) {
  if (!std::filesystem::exists(model_path)) throw DataError(model_path + ": SentencePiece model not found");
  std::string helper = spm_helper_path();
  // Close-on-exec: a helper started later (another model's) must not hold this helper's pipes
  // open, or closing them here would never reach it and its exit would never come.
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) throw Error("cannot create pipes for " + helper);
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]), close(in_pipe[1]);
    throw Error("cannot create pipes for " + helper);
  }
  pid_ = fork();
  if (pid_ < 0) {
    close(in_pipe[0]), close(in_pipe[1]), close(out_pipe[0]), close(out_pipe[1]);
    throw Error("cannot fork " + helper);
  }
  if (pid_ == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    close(in_pipe[0]), close(in_pipe[1]), close(out_pipe[0]), close(out_pipe[1]);
    execl(helper.c_str(), helper.c_str(), "serve", model_path.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  to_ = in_pipe[1];
  from_ = std::make_unique<io::LineReader>(out_pipe[0], helper);
  std::string line;
  const bool started = from_->next(line);
  if (started && line.rfind("O\t", 0) == 0) return;
  stop_helper();  // a constructor that throws runs no destructor: the pipes and the child go here
  if (!started) throw Error(helper + ": the SentencePiece helper did not start (build it with the 'leanseq-spm' target)");
  throw DataError(model_path + ": cannot load SentencePiece model: " + line.substr(2));
}

void SentencePiece::stop_helper() {
  if (to_ >= 0) ::close(to_);  // the helper reads its end and exits
  to_ = -1;
  from_.reset();
  if (pid_ > 0) {
    int status;
    wait_for(pid_, status);
  }
  pid_ = -1;
}

SentencePiece::~SentencePiece() { stop_helper(); }

std::string SentencePiece::request(char kind, const std::string& payload) const {
  std::string clean = payload;
  for (char& c : clean) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::string line;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!write_all(to_, std::string(1, kind) + "\t" + clean + "\n") || !from_->next(line)) {
    throw Error(path_ + ": the SentencePiece helper exited unexpectedly");
  }
  if (line.rfind("O\t", 0) != 0) throw DataError(path_ + ": SentencePiece failed: " + line.substr(2));
  return line.substr(2);
}

std::vector<std::string> SentencePiece::encode(const std::string& text) const {
  std::string joined = request('E', text);
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start < joined.size()) {
    size_t sp = joined.find(' ', start);
    if (sp == std::string::npos) sp = joined.size();
    if (sp > start) pieces.push_back(joined.substr(start, sp - start));
    start = sp + 1;
  }
  return pieces;
}

std::string SentencePiece::decode(const std::vector<std::string>& pieces) const {
  return request('D', join_words(pieces));
}

void SentencePiece::train(const std::vector<std::string>& inputs, const std::string& model_prefix,
                          const SpmTrainOptions& opt) {
  std::string input;
  for (const auto& f : inputs) input += (input.empty() ? "" : ",") + f;
  // Only <unk> inside the SentencePiece model; leanseq maps pieces through its own dictionary.
  std::vector<std::string> args = {
      spm_helper_path(), "train", "--input=" + input, "--model_prefix=" + model_prefix,
      "--vocab_size=" + std::to_string(opt.vocab_size), "--model_type=" + opt.model_type,
      "--character_coverage=" + std::to_string(opt.character_coverage),
      "--input_sentence_size=" + std::to_string(opt.input_sentence_size),
      "--shuffle_input_sentence=true", "--hard_vocab_limit=false", "--bos_id=-1", "--eos_id=-1",
      "--pad_id=-1", "--unk_id=0", "--num_threads=2", "--minloglevel=2"};
  std::string err_path = model_prefix + ".train-log";
  pid_t pid = fork();
  if (pid < 0) throw Error("cannot fork " + args[0]);
  if (pid == 0) {
    FILE* log = std::freopen(err_path.c_str(), "w", stderr);
    (void)log;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::_Exit(127);
  }
  int status = 0;
  wait_for(pid, status);
  std::string log_text;
  if (FILE* f = std::fopen(err_path.c_str(), "r")) {
    int c;
    while ((c = std::fgetc(f)) != EOF) log_text.push_back(static_cast<char>(c));
    std::fclose(f);
  }
  std::filesystem::remove(err_path);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!log_text.empty() && log_text.back() == '\n') log_text.pop_back();
    auto nl = log_text.rfind('\n');
    throw DataError(model_prefix + ".model: SentencePiece training failed: " +
                    (nl == std::string::npos ? log_text : log_text.substr(nl + 1)));
  }
}

}  // namespace leanseq::data
