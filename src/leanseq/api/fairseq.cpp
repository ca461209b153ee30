// leanseq::import_fairseq (include/leanseq/fairseq.h).
#include <leanseq/fairseq.h>

#include "leanseq/interop/fairseq.h"

namespace leanseq {

FairseqImportResult import_fairseq(const FairseqImportOptions& options) { return interop::import_fairseq(options); }

}  // namespace leanseq
