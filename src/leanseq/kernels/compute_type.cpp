#include "leanseq/kernels/compute_type.h"

#include <stdexcept>

namespace leanseq::kernels {

namespace {
const char* const kNoInt8 = "int8 products need oneDNN and AVX2, which this build or CPU lacks; using float32";
}  // namespace

ComputeTypeRequest parse_compute_type(const std::string& name) {
  if (name == "default") return ComputeTypeRequest::default_;
  if (name == "auto") return ComputeTypeRequest::auto_;
  if (name == "float32" || name == "float") return ComputeTypeRequest::float32;
  if (name == "int8" || name == "int8_float32") return ComputeTypeRequest::int8;
  if (name == "int8_bfloat16" || name == "int8_bf16") return ComputeTypeRequest::int8_bfloat16;
  if (name == "bfloat16" || name == "bf16") return ComputeTypeRequest::bfloat16;
  if (name == "float16" || name == "fp16") return ComputeTypeRequest::float16;
  throw std::invalid_argument("unknown compute type '" + name + "' (expected " + compute_type_names() + ")");
}

std::string compute_type_names() { return "default, auto, float32, int8, int8_bfloat16, bfloat16 or float16"; }

ComputeTypeRequest request_for(ComputeType storage) {
  switch (storage) {
    case ComputeType::float32: return ComputeTypeRequest::float32;
    case ComputeType::int8: return ComputeTypeRequest::int8;
    case ComputeType::bfloat16: return ComputeTypeRequest::bfloat16;
    case ComputeType::float16: return ComputeTypeRequest::float16;
  }
  return ComputeTypeRequest::float32;
}

std::string compute_type_name(ComputeType type) {
  switch (type) {
    case ComputeType::float32: return "float32";
    case ComputeType::int8: return "int8";
    case ComputeType::bfloat16: return "bfloat16";
    case ComputeType::float16: return "float16";
  }
  return "?";
}

ResolvedComputeType resolve_compute_type(ComputeTypeRequest request, bool cuda, const CpuVectorSupport& cpu,
                                         bool int8_built) {
  using R = ComputeTypeRequest;
  using T = ComputeType;
  if (cuda) {
    switch (request) {
      case R::default_:
      case R::auto_:
      case R::float32: return {T::float32, ""};
      case R::bfloat16: return {T::bfloat16, ""};
      case R::float16: return {T::float16, ""};
      case R::int8:
      case R::int8_bfloat16: return {T::float32, "int8 products run on the CPU only; using float32 on CUDA"};
    }
  }
  // oneDNN's int8 GEMM needs AVX2 at least; with VNNI (AVX-512) it multiplies bytes natively.
  // Its bfloat16 products (through ATen) need AVX-512 (BW, VL, DQ) and are only emulated without
  // AVX512_BF16. Measured where the CPU has both (docs/fast.md): bfloat16 decodes fastest, then
  // int8, then float32; so `auto` takes bfloat16 where it is native, else int8 where VNNI is,
  // else float32.
  const bool int8_ok = int8_built && cpu.avx2;
  const bool bf16_ok = cpu.avx512bw && cpu.avx512vl && cpu.avx512dq;
  switch (request) {
    case R::auto_:
      if (bf16_ok && cpu.avx512bf16) return {T::bfloat16, ""};
      return {int8_built && cpu.avx512vnni ? T::int8 : T::float32, ""};
    case R::default_:
    case R::float32: return {T::float32, ""};
    case R::int8:
      return int8_ok ? ResolvedComputeType{T::int8, ""}
                     : ResolvedComputeType{T::float32, kNoInt8};
    case R::int8_bfloat16:
      return int8_ok ? ResolvedComputeType{T::int8, "bfloat16 between the int8 products is slower than float32 on "
                                                    "the CPU; using int8 with float32"}
                     : ResolvedComputeType{T::float32, kNoInt8};
    case R::bfloat16:
      return bf16_ok ? ResolvedComputeType{T::bfloat16, ""}
                     : ResolvedComputeType{T::float32, "this CPU has no AVX-512 for bfloat16 products; using float32"};
    case R::float16: return {T::float32, "float16 products run on CUDA only; using float32 on the CPU"};
  }
  return {T::float32, ""};
}

}  // namespace leanseq::kernels
