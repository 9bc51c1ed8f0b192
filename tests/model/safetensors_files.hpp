// Safetensors files for the tests, built from bytes (test_safetensors.cpp: the reader;
// test_attention_loader.cpp: the attention-weight loader): so each bad case is explicit.
#pragma once
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "headsep/error.hpp"
#include "headsep/safetensors.hpp"
#include "test_util.hpp"

namespace safetensors_test {

using json = nlohmann::json;

inline std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

/// A whole file: header length, header, data — exactly these bytes.
inline std::string file_bytes(const std::string& header, const std::string& data = {}) {
  return le64(header.size()) + header + data;
}

inline std::string f32_bytes(const std::vector<float>& v) {
  std::string s;
  for (float f : v) {
    const auto u = std::bit_cast<std::uint32_t>(f);
    for (int i = 0; i < 4; ++i) s += static_cast<char>((u >> (8 * i)) & 0xff);
  }
  return s;
}

/// One tensor of a well-formed file built by build().
struct T {
  std::string name, dtype;
  std::vector<std::uint64_t> shape;
  std::string bytes;
};
inline T f32(std::string name, std::vector<std::uint64_t> shape, const std::vector<float>& v) {
  return {std::move(name), "F32", std::move(shape), f32_bytes(v)};
}
/// Values 0.5 + i/64 (exact in f32), distinct per tensor via `base`.
inline std::vector<float> ramp(std::size_t n, float base) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i) / 64.0f;
  return v;
}
inline T f32r(std::string name, std::vector<std::uint64_t> shape, float base) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  return f32(std::move(name), std::move(shape), ramp(n, base));
}

/// A well-formed file: offsets in the given order, contiguous.
inline std::string build(const std::vector<T>& ts, const json& metadata = nullptr) {
  json h = json::object();
  std::string data;
  for (const T& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  if (!metadata.is_null()) h["__metadata__"] = metadata;
  return file_bytes(h.dump(), data);
}

/// The message of the Error `f` throws (testutil::error_of); fails the test when it throws nothing.
template <class F>
std::string error_of(F&& f) {
  std::string e = testutil::error_of(std::forward<F>(f));
  if (e == "(no error)") FAIL("no headsep::Error thrown");
  return e;
}

struct Files {
  testutil::TempDir dir;
  std::string put(const std::string& name, const std::string& bytes) {
    const std::string p = dir.file(name);
    testutil::write_file(p, bytes);
    return p;
  }
  /// Opens bytes written to `name` and returns the error message.
  std::string open_error(const std::string& name, const std::string& bytes) {
    const std::string p = put(name, bytes);
    return error_of([&] { headsep::SafeTensors st(p); });
  }
};

inline json load_json(const std::string& rel) { return json::parse(testutil::read_file(testutil::source_path(rel))); }

inline std::vector<float> floats(const json& data) {
  std::vector<float> v;
  for (const auto& x : data) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

}  // namespace safetensors_test
