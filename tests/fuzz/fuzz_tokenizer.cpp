// libFuzzer entry point for the tokenizer harness (the harness itself: fuzz_tokenizer.hpp).
#include "fuzz_tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return headsep::fuzz::tokenizer::fuzz_one(data, size);
}
