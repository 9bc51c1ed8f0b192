// libFuzzer entry point for the csv harness (the harness itself: fuzz_csv.hpp).
#include "fuzz_csv.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return headsep::fuzz::csv::fuzz_one(data, size);
}
