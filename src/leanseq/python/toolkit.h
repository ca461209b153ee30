// The module's functions beyond translation: data preparation, checkpoint averaging and
// quantization, the presets and the config keys (training runs the leanseq executable: __init__.py).
#pragma once
#include <pybind11/pybind11.h>

namespace leanseq::python {

void add_toolkit(pybind11::module_& m);

}  // namespace leanseq::python
