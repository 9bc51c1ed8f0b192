// libFuzzer entry point for the params harness (the harness itself: fuzz_params.hpp).
#include "fuzz_params.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return headsep::fuzz::params::fuzz_one(data, size);
}
