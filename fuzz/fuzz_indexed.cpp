// A binarized dataset's index (<prefix>.idx, leanseq's or fairseq-preprocess's) beside a .bin of
// the size the input's first two bytes give (in units of 4 bytes): the dataset opens and every
// sentence reads, or DataError.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "leanseq/core/error.h"
#include "leanseq/data/indexed.h"

namespace {
// The reader opens <prefix>.idx and <prefix>.bin: two memfds behind symlinks in a private
// directory (under $TMPDIR, which scripts/fuzz.sh points into its own scratch directory), made
// once per process and removed at exit.
struct Directory {
  std::string path;
  Directory() {
    const char* tmp = std::getenv("TMPDIR");
    std::string t = std::string(tmp && *tmp ? tmp : "/tmp") + "/leanseq-fuzz-indexed-XXXXXX";
    path = ::mkdtemp(t.data()) ? t : "";
  }
  ~Directory() {
    ::unlink((path + "/x.idx").c_str());
    ::unlink((path + "/x.bin").c_str());
    ::rmdir(path.c_str());
  }
};

std::string prefix_for(const uint8_t* idx, size_t idx_size, size_t bin_ids) {
  static Directory directory;
  const std::string& dir = directory.path;
  static int idx_fd = -1, bin_fd = -1;
  if (idx_fd < 0) {
    idx_fd = ::memfd_create("idx", 0);
    bin_fd = ::memfd_create("bin", 0);
    ::symlink(("/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(idx_fd)).c_str(), (dir + "/x.idx").c_str());
    ::symlink(("/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(bin_fd)).c_str(), (dir + "/x.bin").c_str());
  }
  (void)!::ftruncate(idx_fd, 0);
  (void)!::pwrite(idx_fd, idx, idx_size, 0);
  (void)!::ftruncate(bin_fd, static_cast<off_t>(bin_ids * 4));
  return dir + "/x";
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t bin_ids = data[0] | (static_cast<size_t>(data[1]) << 8);
  const std::string prefix = prefix_for(data + 2, size - 2, bin_ids);
  try {
    leanseq::data::IndexedDataset ds(prefix);
    int64_t sum = 0;
    for (size_t i = 0; i < ds.size(); ++i) {
      for (int64_t id : ds.get(i)) sum += id;
    }
    (void)sum;
  } catch (const leanseq::Error&) {
  }
  return 0;
}
