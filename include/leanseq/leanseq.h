// The whole stable C++ API (docs/cpp.md, docs/versioning.md).
#pragma once
#include <leanseq/error.h>
#include <leanseq/fairseq.h>
#include <leanseq/metrics.h>
#include <leanseq/translator.h>
#include <leanseq/version.h>
