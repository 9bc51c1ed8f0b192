// The binding files of headsep._headsep, one bind_*() each; module.cpp calls them in order.
// A new binding file adds one line here and one in module.cpp.
#pragma once
#include <nanobind/nanobind.h>

namespace headsep::python {

void bind_core(nanobind::module_& m);  // core.cpp (+ result.cpp, run.cpp, model.cpp): errors, plugins(), run(), model()
void bind_plugins(nanobind::module_& m);  // python_plugins.cpp: plugins written in Python
void bind_attention(nanobind::module_& m);  // attention.cpp: headsep.attention (arrays in, read in place)
void bind_cli(nanobind::module_& m);  // cli.cpp: the headsep command (python -m headsep) in this process

}  // namespace headsep::python
