// libFuzzer entry point for the safetensors harness (the harness itself: fuzz_safetensors.hpp).
#include "fuzz_safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return headsep::fuzz::safetensors::fuzz_one(data, size);
}
