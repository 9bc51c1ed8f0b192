// fuzzplug's script: what every one of its functions does, decoded from the fuzz bytes up front
// (script.cpp). fuzzplug.cpp holds the plugin's functions, which follow the script.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "headsep/plugin.h"

namespace fuzzplug {

constexpr std::uint32_t kThrow = 99;  // a status that makes the function throw a C++ exception instead

// One step of a next_chunk program.
struct Op {
  std::uint8_t kind = 0;  // see run_op in fuzzplug.cpp
  std::uint32_t a = 0, b = 0;
  std::uint64_t n = 0;
  std::uint8_t mode = 0;
  const char* text = nullptr;
  std::uint64_t len = 0;
};
struct Chunk {
  std::vector<Op> ops;
  std::int32_t status = HEADSEP_OK;
};

struct Script {
  std::deque<std::string> strings;  // owns every string handed out (deque: stable addresses)
  headsep_plugin_descriptor d{};
  std::vector<headsep_param_spec> params;
  const char* error_text = nullptr;
  std::int32_t open_status = HEADSEP_OK, describe_status = HEADSEP_OK;
  bool null_state = false;
  // scenario generators
  headsep_schema schema{};
  std::vector<const char*> features, scenarios;
  std::vector<Chunk> chunks;
  std::uint8_t after_end = 0;  // 0: END, 1: data again (chunk 0's program), 2: ERROR
  // weighting schemes
  headsep_weighting_info info{};
  std::vector<const char*> designs;
  std::vector<headsep_attention_spec> specs;
  std::vector<std::uint8_t> spec_auto, spec_matrices;  // per spec: fields fixed at create(), matrix mode
  std::vector<std::vector<float>> matrices;
  std::int32_t create_status = HEADSEP_OK, describe_w_status = HEADSEP_OK, weights_status = HEADSEP_OK;
  std::uint8_t weight_values = 0;
  std::uint32_t null_functions = 0;  // bit i: the i-th function field of the descriptor is NULL
  std::string st_dir;
};

/// Decodes `data` into `s` (a fresh Script whose st_dir is set). Byte 0 (and the end of the
/// input) picks each field's well-formed value, so a short input is a well-behaved plugin.
void decode(const std::uint8_t* data, std::size_t size, Script& s);

}  // namespace fuzzplug
