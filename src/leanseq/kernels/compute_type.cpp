#include "leanseq/kernels/compute_type.h"

#include <stdexcept>

#include "leanseq/kernels/int8_gemm.h"

namespace leanseq::kernels {

namespace {
const char* const kNoInt8 = "int8 products need oneDNN and AVX2, which this build or CPU lacks; using float32";
}  // namespace

const std::vector<std::pair<std::string, ComputeTypeRequest>>& compute_type_requests() {
  using R = ComputeTypeRequest;
  static const std::vector<std::pair<std::string, R>> names = {
      {"default", R::default_},   {"auto", R::auto_},           {"float32", R::float32},
      {"float", R::float32},      {"int8", R::int8},            {"int8_float32", R::int8},
      {"int8_bfloat16", R::int8_bfloat16}, {"int8_bf16", R::int8_bfloat16}, {"bfloat16", R::bfloat16},
      {"bf16", R::bfloat16},      {"float16", R::float16},      {"fp16", R::float16}};
  return names;
}

ComputeTypeRequest parse_compute_type(const std::string& name) {
  for (const auto& [accepted, request] : compute_type_requests()) {
    if (name == accepted) return request;
  }
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
  // AVX512_BF16. Measured (docs/fast.md): where the CPU has AMX or AVX-512 VNNI, int8 decodes
  // fastest (an EPYC with VNNI and AVX512_BF16: int8 1.6x bfloat16 at batch 32); where it
  // multiplies bfloat16 natively without either, bfloat16; else float32 (int8 without VNNI is
  // slower than float32). ComputeTypes.AutoPicksTheFastestTypeMeasuredOnThisCpu holds the pick
  // against a measurement wherever the suite runs.
  const bool int8_ok = int8_built && cpu.avx2;
  const bool bf16_ok = cpu.avx512bw && cpu.avx512vl && cpu.avx512dq;
  switch (request) {
    case R::auto_:
      if (int8_ok && (cpu.amx_int8 || cpu.avx512vnni)) return {T::int8, ""};
      if (bf16_ok && cpu.avx512bf16) return {T::bfloat16, ""};
      return {T::float32, ""};
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

ResolvedComputeType resolve_compute_type(ComputeTypeRequest request, bool cuda) {
  auto cpu = onednn_cpu_support();
  cpu.amx_int8 = cpu.amx_int8 && int8_amx_available();  // and oneDNN runs its int8 products there
  return resolve_compute_type(request, cuda, cpu, int8_gemm_available());
}

}  // namespace leanseq::kernels
