// The one place for LibTorch version switches (1.13 CPU from Debian, 2.x CUDA on GPU machines).
#pragma once
#include <torch/version.h>

#define LEANSEQ_TORCH_VERSION (TORCH_VERSION_MAJOR * 100 + TORCH_VERSION_MINOR)

namespace leanseq::compat {
// True when LibTorch is 2.0 or newer.
constexpr bool kTorch2 = LEANSEQ_TORCH_VERSION >= 200;
}  // namespace leanseq::compat
