// The BLAS kernels behind LibTorch's float32 products. Debian's OpenBLAS (0.3.21, built for every
// x86 core it knows) picks its kernels from the CPU model at load time and takes the CPUs it does
// not recognise (recent AMD EPYC among them) for a Prescott: SSE3 kernels at about a fifth of what
// the same core does with its AVX-512 kernels. OpenBLAS reads OPENBLAS_CORETYPE only when it is
// loaded, so the fix must come before the process starts: ensure_fast_blas() re-executes the
// program once with OPENBLAS_CORETYPE set to the best kernel family the CPU supports, unless the
// user set that variable (then it is respected) or the library already runs kernels that good.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace leanseq {

// What the CPU can run, as far as OpenBLAS's kernel families and the low-precision products
// (kernels/compute_type.h) are concerned.
struct CpuVectorSupport {
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512cd = false;
  bool avx512vnni = false, avx512bf16 = false;  // 8-bit dot products, bf16 dot products
  bool avxvnni = false;                         // 8-bit dot products on 256-bit registers (AVX-VNNI)
  bool amx_int8 = false;                        // 8-bit products on AMX tiles (enabled by the OS)
};
CpuVectorSupport detect_cpu_vector_support();

// The OPENBLAS_CORETYPE value to run with, or "" to leave the library as it is: given the kernel
// family the loaded OpenBLAS chose (openblas_get_corename(), "" when the BLAS is not OpenBLAS),
// what the CPU supports, and the user's OPENBLAS_CORETYPE (nullptr when unset).
std::string openblas_coretype_to_request(const std::string& loaded_core, const CpuVectorSupport& cpu,
                                         const char* user_setting);

// How long idle worker threads spin before they sleep. LibTorch runs its element-wise work on
// OpenMP (libgomp) threads and its float32 products on OpenBLAS's own threads: two pools, each
// spinning by default after its work (OpenBLAS for about 2^28 cycles), so that on a machine with
// as many cores as threads each pool starves the other. Measured on 2 cores, 2 threads
// (docs/performance.md): training 2.9x and float32 decoding 5x faster when both pools go to sleep
// soon. Only the settings the user left unset, as (name, value) pairs: OPENBLAS_THREAD_TIMEOUT=4
// (2^4 cycles, OpenBLAS's shortest) and GOMP_SPINCOUNT=1000 (unless OMP_WAIT_POLICY is set).
std::vector<std::pair<std::string, std::string>> thread_wait_settings(const char* openblas_timeout,
                                                                      const char* gomp_spincount,
                                                                      const char* omp_wait_policy);

// Called first in main(): both libraries read their settings only when they are loaded, so this
// re-executes the program once with OPENBLAS_CORETYPE set when openblas_coretype_to_request()
// asks for it and with thread_wait_settings(), and returns otherwise (also when the re-execution
// is impossible: the program then runs on with the libraries' own choices).
void ensure_fast_blas(char** argv);

// One line for start-up logs: the BLAS library, its kernel family, and how it was chosen.
std::string blas_summary();

// openblas_coretype_to_request() for this process as it runs (the loaded library's family, this
// CPU, no user setting): "" when its kernels are the best the CPU supports or the BLAS is not
// OpenBLAS. The Python module, which cannot restart its interpreter, sets OPENBLAS_CORETYPE before
// the library loads (leanseq/python/leanseq/__init__.py); its tests check the result with this.
std::string better_openblas_coretype();

}  // namespace leanseq
