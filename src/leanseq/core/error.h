// Typed errors (declared in the public include/leanseq/error.h). Library code throws these (or
// TORCH_CHECK in tensor code); only cli/main.cpp turns them into exit codes.
#pragma once
#include <leanseq/error.h>
