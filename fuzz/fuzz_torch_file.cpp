// torch.save files (zip or legacy) as import-fairseq reads them: the pickle, then every tensor it
// refers to, each read in full (so that a view outside its storage shows as an ASan report).
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "input_file.h"
#include "leanseq/interop/torch_file.h"

using leanseq::interop::PyRef;
using leanseq::interop::PyValue;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  leanseq::fuzz::InputFile input(data, size);
  try {
    leanseq::interop::TorchFile file(input.path());
    // Every tensor of the (checked, so finite) value, without recursion.
    std::vector<PyRef> todo{file.root()};
    for (size_t seen = 0; !todo.empty() && seen < 100000; ++seen) {
      PyRef v = todo.back();
      todo.pop_back();
      if (v->kind == PyValue::Kind::tensor && v->tensor) {
        auto t = file.tensor(*v->tensor);
        if (t.numel() > 0 && t.is_floating_point()) (void)t.to(torch::kDouble).sum().item<double>();
        if (t.numel() > 0 && !t.is_floating_point()) (void)t.to(torch::kLong).sum().item<int64_t>();
      }
      for (const auto& x : v->items) todo.push_back(x);
      for (const auto& [k, x] : v->entries) todo.push_back(x);
    }
  } catch (const leanseq::interop::PickleError&) {
  }
  return 0;
}
