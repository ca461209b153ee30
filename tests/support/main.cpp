// The main() of every test program: the same start as leanseq's own programs (the BLAS kernels
// for this CPU, freed memory kept), then GoogleTest.
#include <gtest/gtest.h>

#include "leanseq/core/startup.h"

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
