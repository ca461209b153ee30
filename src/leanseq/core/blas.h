// The BLAS kernels behind LibTorch's float32 products. Debian's OpenBLAS (0.3.21, built for every
// x86 core it knows) picks its kernels from the CPU model at load time and takes the CPUs it does
// not recognise (recent AMD EPYC among them) for a Prescott: SSE3 kernels at about a fifth of what
// the same core does with its AVX-512 kernels. use_best_openblas_kernels() switches the loaded
// library to the best kernel family the CPU supports, unless the user set OPENBLAS_CORETYPE (then
// it is respected) or the library already runs kernels that good; the idle-thread settings, which
// the libraries read only when they initialise, are in the environment before they do
// (restart_with_thread_settings(), from the program's pre-initialisation, core/startup.h).
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
// (2^4 cycles, OpenBLAS's shortest) and GOMP_SPINCOUNT=10000 (unless OMP_WAIT_POLICY is set): long
// enough that libgomp's threads are still awake for the next parallel loop of a decoding step
// (1.18x int8 decoding at 2 threads over 1000), far shorter than libgomp's own 300000.
std::vector<std::pair<std::string, std::string>> thread_wait_settings(const char* openblas_timeout,
                                                                      const char* gomp_spincount,
                                                                      const char* omp_wait_policy);

// Re-executes the program with the unset thread_wait_settings() added to `envp`, and returns only
// when none is missing (or the re-execution failed). Called from the program's pre-initialisation
// (core/startup.h): the libraries are loaded and relocated then, none has run its initialisers, so
// the restart costs the loading alone (tens of milliseconds) and they read the settings when they
// initialise. `envp` is read directly: the C library's environment is not set up yet.
void restart_with_thread_settings(char** argv, char** envp);

// Makes the loaded OpenBLAS run the kernel family that openblas_coretype_to_request() asks for,
// in this process: its build for every core chooses its kernels in gotoblas_dynamic_init(), which
// reads OPENBLAS_CORETYPE, and gotoblas_dynamic_quit() forgets the choice (both exported by
// Debian's library). Call it before any product runs. Returns true when the library now runs the
// family asked for (OPENBLAS_CORETYPE is then set, so that child processes load it the same way);
// false when nothing was asked for, or the library lacks the two entry points or ignored the
// request (it is then left as it was).
bool use_best_openblas_kernels();

// Called first in main(): use_best_openblas_kernels(), and where that could not switch the
// library, or the thread settings are still missing from the environment (a program without
// core/startup.h's pre-initialisation), re-executes the program once with them set. Returns
// otherwise (also when the re-execution is impossible: the program then runs on with the
// libraries' own choices).
void ensure_fast_blas(char** argv);

// One line for start-up logs: the BLAS library, its kernel family, and how it was chosen.
std::string blas_summary();

// openblas_coretype_to_request() for this process as it runs (the loaded library's family, this
// CPU, no user setting): "" when its kernels are the best the CPU supports or the BLAS is not
// OpenBLAS. The Python module switches the library when it is imported
// (leanseq/python/leanseq/__init__.py); its tests check the result with this.
std::string better_openblas_coretype();

}  // namespace leanseq
