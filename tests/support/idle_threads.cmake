# Read by ctest before it runs the tests (TEST_INCLUDE_FILES, tests/CMakeLists.txt): the idle-thread
# settings every leanseq program restarts itself for when they are missing (core/blas.h,
# thread_wait_settings()) go into the environment the tests inherit, under the same rule (only what
# the user left unset), so that each test program and each command it runs starts once instead of
# twice. Startup.AProgramWithoutTheSettingsRestartsWithThem runs the program without them.
if(NOT DEFINED ENV{OPENBLAS_THREAD_TIMEOUT})
  set(ENV{OPENBLAS_THREAD_TIMEOUT} 4)
endif()
if(NOT DEFINED ENV{GOMP_SPINCOUNT} AND NOT DEFINED ENV{OMP_WAIT_POLICY})
  set(ENV{GOMP_SPINCOUNT} 10000)
endif()
