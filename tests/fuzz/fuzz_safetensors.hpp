// Fuzz harness: the safetensors reader and the attention-weight loader (runtime/model/safetensors.cpp).
// The whole input is the file. It lives in an anonymous in-memory file (memfd) opened through
// /proc/self/fd, so the real open/fstat/mmap path runs without touching the disk and the public
// API stays path-based. Each input: SafeTensors (every tensor's raw bytes, read_f32 with and
// without the finiteness check), then load_attention_safetensors as the qkv plugin calls it
// (heads counted or given, d_model inferred, the file as its own baseline).
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "fuzz_common.hpp"
#include "headsep/safetensors.hpp"

namespace headsep::fuzz::safetensors {

/// One reusable memfd per thread holding the current input.
inline std::string memfd_path(const std::uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("fuzz.safetensors", MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error("memfd_create failed");
  if (::ftruncate(fd, 0) != 0) throw std::runtime_error("ftruncate failed");
  std::size_t done = 0;
  while (done < size) {
    const ssize_t w = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (w <= 0) throw std::runtime_error("pwrite failed");
    done += static_cast<std::size_t>(w);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

inline int fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string path = memfd_path(data, size);
  accepted([&] {
    const SafeTensors st(path);
    std::uint64_t covered = 0;
    for (const TensorInfo& t : st.tensors()) {
      const auto raw = st.raw(t.name);
      expect(raw.size() == t.end - t.begin, "raw() size differs from data_offsets");
      expect(raw.size() == t.elements * dtype_size(t.dtype), "tensor bytes differ from shape x dtype");
      expect(st.find(t.name) == &t, "find() does not return the listed tensor");
      covered += raw.size();
      if (!readable_as_f32(t.dtype)) continue;
      const auto v = st.read_f32(t.name, std::nullopt, SafeTensors::NonFinite::allow);
      expect(v.size() == t.elements, "read_f32 returned the wrong element count");
      accepted([&] { st.read_f32(t.name, ShapeSpec{t.shape, "[as listed]"}); });
    }
    expect(covered == st.data_size(), "tensors do not tile the data section");
  });
  accepted([&] { load_attention_safetensors(path, 0).validate("fuzz"); });
  accepted([&] { load_attention_safetensors(path, 2).validate("fuzz"); });
  accepted([&] { load_attention_safetensors(path, 1, {.baseline = path, .d_model = 8}).validate("fuzz"); });
  return 0;
}

}  // namespace headsep::fuzz::safetensors
