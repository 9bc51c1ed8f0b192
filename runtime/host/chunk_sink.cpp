// The callbacks of headsep_chunk_out, through which a scenario plugin writes a chunk: each checks
// its arguments (indices, sizes, limits, UTF-8) as the plugin calls it and refuses late calls.
#include "host/chunk_sink.hpp"

#include "headsep/plugin_host.hpp"
#include "host/text_checks.hpp"
#include "support/float_bits.hpp"
#include "support/text_util.hpp"

namespace headsep::host {

namespace lim = plugin_limits;

void LateCalls::record(std::uint64_t chunk, const char* callback) {
  std::lock_guard lock(mutex);
  if (what.empty())
    what = std::string(callback) + " was called through the headsep_chunk_out of chunk " + std::to_string(chunk) +
           " after that next_chunk call had returned (refused: `out` and every buffer it gave are valid only "
           "during the next_chunk call that received them)";
  any.store(true, std::memory_order_release);
}

std::string LateCalls::message() {
  std::lock_guard lock(mutex);
  return what;
}

ChunkSlot* SlotPool::take(std::uint64_t chunk) {
  std::lock_guard lock(mutex_);
  ChunkSlot* s = nullptr;
  if (free_.size() > kRotation) {
    s = free_.front();
    free_.pop_front();
  } else {
    all_.push_back(std::make_unique<ChunkSlot>());
    s = all_.back().get();
    s->late = late_;
  }
  s->chunk.store(chunk, std::memory_order_relaxed);
  return s;
}

void SlotPool::give(ChunkSlot* s) {
  std::lock_guard lock(mutex_);
  free_.push_back(s);
}

ChunkSink::ChunkSink(ReportBatch& batch, std::uint64_t max, std::uint32_t features, std::uint32_t heads)
    : b(&batch), max_reports(max), n_features(features), given_heads(heads), feature_set(features, 0) {
  c = headsep_chunk_out{};
  c.struct_size = sizeof(headsep_chunk_out);
  c.token_offsets = &token_offsets;
  c.feature = &feature;
  c.scenario = &scenario;
  c.given_weights = &given_weights;
  c.report_id = &report_id;
  c.token_name = &token_name;
  c.embeddings = &embeddings;
  // Reuse the batch's buffers; each callback fills what it hands out with detail::unwritten()
  // (offsets with kUnwrittenOffset), so check_chunk refuses any element the plugin skipped.
  b->features.resize(features);
  b->report_ids.clear();
  b->token_names.clear();
  b->scenarios.clear();
  b->given_weights.clear();
  b->source_rows = 0;
}

ChunkSink* ChunkSink::self(headsep_chunk_out* o, const char* callback) {
  auto* slot = reinterpret_cast<ChunkSlot*>(o);
  if (ChunkSink* s = slot->sink.load(std::memory_order_acquire)) return s;
  slot->late->record(slot->chunk.load(std::memory_order_relaxed), callback);
  thread_local ReportBatch scratch;
  thread_local ChunkSink refusing(scratch, 0, 0, 0);
  refusing.dead = true;
  refusing.error.clear();
  return &refusing;
}

std::uint64_t* ChunkSink::token_offsets(headsep_chunk_out* o, std::uint64_t n) {
  auto* s = self(o, "token_offsets()");
  if (s->dead) return nullptr;
  if (s->offsets_set) return s->fail<std::uint64_t>("token_offsets() called twice");
  if (n == 0 || n > s->max_reports)
    return s->fail<std::uint64_t>("token_offsets(" + std::to_string(n) + "): a chunk holds 1.." +
                                  std::to_string(s->max_reports) + " reports");
  try {
    s->b->token_offset.assign(n + 1, kUnwrittenOffset);  // poisoned: check_chunk names an offset left so
  } catch (...) {
    return s->fail<std::uint64_t>("out of memory for token offsets");
  }
  s->offsets_set = true;
  s->n_reports = n;
  return s->b->token_offset.data();
}

double* ChunkSink::feature(headsep_chunk_out* o, std::uint32_t f, std::uint64_t n) {
  auto* s = self(o, "feature()");
  if (s->dead) return nullptr;
  if (f >= s->n_features)
    return s->fail<double>("feature(" + std::to_string(f) + "): the schema has " + std::to_string(s->n_features) + " features");
  if (n > lim::max_chunk_tokens) return s->fail<double>(too_many_tokens("feature", n));
  try {
    s->b->features[f].assign(n, detail::unwritten());  // poisoned: check_chunk names a value left so
  } catch (...) {
    return s->fail<double>("out of memory for feature values");
  }
  s->feature_set[f] = 1;
  return n ? s->b->features[f].data() : no_values<double>();
}

std::int32_t ChunkSink::scenario(headsep_chunk_out* o, const char* name, std::uint64_t len) {
  auto* s = self(o, "scenario()");
  if (s->dead) return 1;
  if (!name || len == 0) return s->fail_code("scenario(): empty scenario name");
  if (len > lim::max_label_bytes)
    return s->fail_code("scenario(): a name of " + std::to_string(len) + " bytes (the limit is " +
                        std::to_string(lim::max_label_bytes) + ")");
  if (auto bad = find_invalid_utf8(std::string_view(name, len)))
    return s->fail_code("scenario(): the name '" + shown(std::string_view(name, len)) + "' is not valid UTF-8 (byte " +
                        std::to_string(*bad + 1) + ")");
  if (s->scenarios.size() >= lim::max_scenarios)
    return s->fail_code("scenario(): more than " + std::to_string(lim::max_scenarios) + " scenarios in one chunk");
  try {
    s->scenarios.emplace_back(name, len);
  } catch (...) {
    return s->fail_code("out of memory");
  }
  return 0;
}

double* ChunkSink::given_weights(headsep_chunk_out* o, std::uint32_t slot, std::uint32_t row, std::uint64_t n) {
  auto* s = self(o, "given_weights()");
  if (s->dead) return nullptr;
  if (s->given_heads == 0) return s->fail<double>("given_weights(): the schema declares no given heads");
  if (row > s->given_heads || slot >= lim::max_scenarios)
    return s->fail<double>("given_weights(" + std::to_string(slot) + ", " + std::to_string(row) + "): row must be 0.." +
                           std::to_string(s->given_heads) + " and slot below " + std::to_string(lim::max_scenarios));
  if (n > lim::max_chunk_tokens) return s->fail<double>(too_many_tokens("given_weights", n));
  const std::size_t i = std::size_t(slot) * (std::size_t(s->given_heads) + 1) + row;
  try {
    if (s->b->given_weights.size() <= i) s->b->given_weights.resize(i + 1);
    s->b->given_weights[i].assign(n, detail::unwritten());
  } catch (...) {
    return s->fail<double>("out of memory for given weights");
  }
  return n ? s->b->given_weights[i].data() : no_values<double>();
}

std::int32_t ChunkSink::report_id(headsep_chunk_out* o, const char* id, std::uint64_t len) {
  auto* s = self(o, "report_id()");
  if (s->dead) return 1;
  auto& ids = s->b->report_ids;
  if (!id && len) return s->fail_code("report_id(): NULL id of length " + std::to_string(len));
  if (ids.size() >= (s->offsets_set ? s->n_reports : s->max_reports))
    return s->fail_code("report_id(): more ids than the chunk's " +
                        std::to_string(s->offsets_set ? s->n_reports : s->max_reports) + " reports");
  const std::string_view v(id ? id : "", len);
  if (auto bad = find_invalid_utf8(v))
    return s->fail_code("report_id(): id " + std::to_string(ids.size() + 1) + " of the chunk, '" + shown(v) +
                        "', is not valid UTF-8 (byte " + std::to_string(*bad + 1) + ")");
  try {
    ids.emplace_back(v);
  } catch (...) {
    return s->fail_code("out of memory");
  }
  return 0;
}

float* ChunkSink::embeddings(headsep_chunk_out* o, std::uint64_t n) {
  auto* s = self(o, "embeddings()");
  if (s->dead) return nullptr;
  if (s->d_model == 0) return s->fail<float>("embeddings(): the schema declares no embeddings (d_model = 0)");
  // The chunk token limit first, as feature() has it (found by tests/fuzz: 2^31+1 tokens passed
  // the 2^40-floats bound and the host tried to allocate 8 GB for a malformed request).
  if (n > lim::max_chunk_tokens) return s->fail<float>(too_many_tokens("embeddings", n));
  if (n > (std::uint64_t(1) << 40) / s->d_model) return s->fail<float>("embeddings(" + std::to_string(n) + "): too many tokens");
  try {
    s->b->embeddings.assign(n * s->d_model, detail::unwritten32());
  } catch (...) {
    return s->fail<float>("out of memory for embeddings");
  }
  s->embeddings_set = true;
  return n ? s->b->embeddings.data() : no_values<float>();
}

std::int32_t ChunkSink::token_name(headsep_chunk_out* o, const char* name, std::uint64_t len) {
  auto* s = self(o, "token_name()");
  if (s->dead) return 1;
  auto& names = s->b->token_names;
  if (!name && len) return s->fail_code("token_name(): NULL name of length " + std::to_string(len));
  if (names.size() >= lim::max_chunk_tokens) return s->fail_code(too_many_tokens("token_name", names.size() + 1));
  const std::string_view v(name ? name : "", len);
  if (auto bad = find_invalid_utf8(v))
    return s->fail_code("token_name(): name " + std::to_string(names.size() + 1) + " of the chunk, '" + shown(v) +
                        "', is not valid UTF-8 (byte " + std::to_string(*bad + 1) + ")");
  try {
    names.emplace_back(v);
  } catch (...) {
    return s->fail_code("out of memory");
  }
  return 0;
}

std::string ChunkSink::too_many_tokens(const char* fn, std::uint64_t n) {
  return std::string(fn) + "(): " + std::to_string(n) + " tokens (a chunk holds at most " +
         std::to_string(lim::max_chunk_tokens) + ")";
}

std::int32_t ChunkSink::fail_code(std::string why) {
  if (error.empty()) error = std::move(why);
  return 1;
}

}  // namespace headsep::host
