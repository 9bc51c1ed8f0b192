// libFuzzer entry point for the axes harness (the harness itself: fuzz_axes.hpp).
#include "fuzz_axes.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return headsep::fuzz::axes::fuzz_one(data, size);
}
