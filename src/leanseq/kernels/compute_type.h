// The numeric type of a model's matrix products at inference (CTranslate2's names): float32,
// int8 (kernels/int8_gemm.h: oneDNN on the CPU), bfloat16 and float16 (ATen's products in those
// types: oneDNN on the CPU, cuBLAS on CUDA). Everything else (embeddings, normalisation,
// softmax, the search) stays float32. A request the device cannot honour falls back to a type it
// can, with a one-line notice; `auto` picks the fastest type measured for the device.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "leanseq/core/blas.h"

namespace leanseq::kernels {

enum class ComputeType { float32, int8, bfloat16, float16 };
// What users may ask for: the types, `auto`, int8 with bfloat16 between the products, and
// `default`: the type the checkpoint's weights are stored in (callers map it to that type before
// resolving; resolve_compute_type takes it as float32).
enum class ComputeTypeRequest { default_, auto_, float32, int8, int8_bfloat16, bfloat16, float16 };
// The request that keeps weights stored in `storage` in their type.
ComputeTypeRequest request_for(ComputeType storage);

// Every accepted name and what it asks for: "default", "auto", "float32", "int8", "int8_bfloat16",
// "bfloat16", "float16", and the aliases "float", "int8_float32", "int8_bf16", "bf16", "fp16".
const std::vector<std::pair<std::string, ComputeTypeRequest>>& compute_type_requests();
// One of those names; throws std::invalid_argument naming the accepted values for another.
ComputeTypeRequest parse_compute_type(const std::string& name);
std::string compute_type_name(ComputeType type);
std::string compute_type_names();  // the accepted names, for help and error messages

struct ResolvedComputeType {
  ComputeType type = ComputeType::float32;
  std::string notice;  // why the request was not honoured as asked ("" when it was)
};
// The type to run `request` with on the CPU described by `cpu` (cuda: on a CUDA device).
// int8_built: whether this build has the int8 products (int8_gemm_available()).
ResolvedComputeType resolve_compute_type(ComputeTypeRequest request, bool cuda, const CpuVectorSupport& cpu,
                                         bool int8_built);
// The same for this machine's CPU and this build.
ResolvedComputeType resolve_compute_type(ComputeTypeRequest request, bool cuda);

}  // namespace leanseq::kernels
