// Where the real-model tests find all-MiniLM-L6-v2: $HEADSEP_MODEL_DIR (scripts/test.sh sets it
// after scripts/fetch_model.sh), else the fetch script's default cache folder. A missing model is
// a test failure that says how to fetch it, never a skip.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace testutil {

inline std::filesystem::path model_dir() {
  std::filesystem::path dir;
  if (const char* e = std::getenv("HEADSEP_MODEL_DIR"); e && *e) {
    dir = e;
  } else {
    const char* cache = std::getenv("HEADSEP_MODEL_CACHE");
    const char* home = std::getenv("HOME");
    dir = cache && *cache ? std::filesystem::path(cache) : std::filesystem::path(home ? home : "/root") / ".cache/headsep";
    dir /= "all-minilm-l6-v2";
  }
  if (!std::filesystem::exists(dir / "model.safetensors") || !std::filesystem::exists(dir / "vocab.txt"))
    throw std::runtime_error("the test model is not in " + dir.string() +
                             ": run scripts/fetch_model.sh (scripts/test.sh does) or set HEADSEP_MODEL_DIR");
  return dir;
}

}  // namespace testutil
