// NB_MODULE(_headsep): the extension's entry, kept thin; each binding file registers its part
// (bindings.hpp). The public package is python/headsep/__init__.py.
#include "bindings.hpp"

NB_MODULE(_headsep, m) {
  m.doc() = "headsep's engine (C++): use the headsep package, not this module";
  headsep::python::bind_core(m);
  headsep::python::bind_plugins(m);
  headsep::python::bind_attention(m);
  headsep::python::bind_cli(m);
}
