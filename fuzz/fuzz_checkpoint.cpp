// A leanseq checkpoint's container as read_checkpoint opens it: the zip directory and every
// record's CRC32 (core/zip.h), then, for an archive that passes, LibTorch's archive reader and the
// records read_checkpoint reads first.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>

#include "input_file.h"
#include "leanseq/core/zip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  leanseq::fuzz::InputFile input(data, size);
  try {
    leanseq::zip::Reader(input.path()).verify_all();
  } catch (const leanseq::zip::ZipError&) {
    return 0;
  }
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(input.path());
    torch::Tensor t;
    if (archive.try_read("format_version", t) && t.numel() > 0) (void)t.sum().item<double>();
    if (archive.try_read("config", t) && t.numel() > 0) (void)t.sum().item<double>();
  } catch (const c10::Error&) {
  } catch (const std::exception&) {
  }
  return 0;
}
