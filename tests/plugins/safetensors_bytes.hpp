// Safetensors files built from bytes in tests (the format: an 8-byte little-endian header length,
// a JSON header padded to 8 bytes, then the data), shared by the tensor and array-input tests.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace testutil {

struct Tensor {
  std::string name, dtype;
  std::vector<std::uint64_t> shape;
  std::string bytes;
};

template <class T>
inline std::string bytes_of(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

/// A safetensors file: 8-byte little-endian header length, JSON header (padded to 8), data.
inline std::string safetensors(const std::vector<Tensor>& ts, const std::map<std::string, std::string>& meta = {}) {
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  if (!meta.empty()) h["__metadata__"] = meta;
  std::string header = h.dump();
  while (header.size() % 8) header += ' ';
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

}  // namespace testutil
