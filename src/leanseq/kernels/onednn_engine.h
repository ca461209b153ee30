// The one oneDNN CPU engine the kernels that call oneDNN directly share (int8_gemm.cpp,
// batched_matmul.cpp). Only for files compiled with LEANSEQ_WITH_DNNL.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

namespace leanseq::kernels {

inline const dnnl::engine& onednn_cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

}  // namespace leanseq::kernels
