// GET /spec: an OpenAPI 3.0 document of what this server does, its endpoints, their fields (the
// decoding options from decode/option_table.h, with their ranges and defaults) and the languages
// it serves.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "leanseq/decode/options.h"
#include "leanseq/serve/libretranslate.h"
#include "leanseq/serve/models.h"

namespace leanseq::serve {

nlohmann::json openapi_spec(const std::vector<ModelInfo>& models, const LibreTranslateOptions& lt,
                            const decode::TranslateOptions& defaults, const std::string& version);

}  // namespace leanseq::serve
