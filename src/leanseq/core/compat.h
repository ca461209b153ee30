// The switches between the LibTorch versions leanseq builds against: Debian's 1.13 (CPU) and the
// 2.x of the CUDA machines. Code elsewhere uses these names instead of testing versions itself.
#pragma once
#include <torch/version.h>

#define LEANSEQ_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10::Allocator: allocate() is const up to 2.2; from 2.3 on it is not, and copy_data() must be
// defined (c10::Allocator::default_copy_data is a memcpy).
#if LEANSEQ_TORCH_AT_LEAST(2, 3)
#define LEANSEQ_ALLOCATOR_ALLOCATE_CONST
#define LEANSEQ_ALLOCATOR_HAS_COPY_DATA 1
#else
#define LEANSEQ_ALLOCATOR_ALLOCATE_CONST const
#define LEANSEQ_ALLOCATOR_HAS_COPY_DATA 0
#endif

// c10d: from 2.0 on, process groups such as ProcessGroupGloo and ProcessGroupNCCL derive from
// c10d::Backend; in 1.13 they derive from c10d::ProcessGroup.
#if LEANSEQ_TORCH_AT_LEAST(2, 0)
#define LEANSEQ_C10D_BACKEND_HEADER <torch/csrc/distributed/c10d/Backend.hpp>
#define LEANSEQ_C10D_BACKEND c10d::Backend
#else
#define LEANSEQ_C10D_BACKEND_HEADER <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define LEANSEQ_C10D_BACKEND c10d::ProcessGroup
#endif
