// libFuzzer entry point for the plugin harness (the harness itself: fuzz_plugin.hpp).
#include "fuzz_plugin.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return headsep::fuzz::plugin::fuzz_one(data, size);
}
