#include "profile/scaling.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "headsep/error.hpp"
#include "support/progress.hpp"

namespace headsep::prof {

std::vector<unsigned> parse_thread_counts(const std::string& list, unsigned cores, const char* option) {
  std::vector<unsigned> out;
  if (list.empty()) {
    cores = std::max(1u, cores);
    for (unsigned t = 1; t < cores; t *= 2) out.push_back(t);
    out.push_back(cores);
    return out;
  }
  std::size_t i = 0;
  while (i <= list.size()) {
    std::size_t j = list.find(',', i);
    if (j == std::string::npos) j = list.size();
    const std::string item = list.substr(i, j - i);
    char* end = nullptr;
    const unsigned long v = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end || v == 0 || v > 4096)
      throw UsageError(std::string(option) + ": '" + item + "' is not a count (1..4096), in '" + list + "'");
    out.push_back(static_cast<unsigned>(v));
    i = j + 1;
  }
  return out;
}

namespace {

// splitmix64 finaliser over 8-byte words: fast and bit-exact (not cryptographic).
inline std::uint64_t mix(std::uint64_t h, std::uint64_t x) noexcept {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}
std::uint64_t hash_doubles(std::uint64_t h, const std::vector<double>& v) {
  h = mix(h, v.size());
  for (double d : v) {
    std::uint64_t x;
    std::memcpy(&x, &d, 8);
    h = mix(h, x);
  }
  return h;
}

struct HashPartial : SinkPartial {
  std::uint64_t h = 0;
};

class MetricHash final : public ResultSink {
 public:
  explicit MetricHash(std::uint64_t& out) : out_(out) { out_ = 0; }
  void prepare(const BatchResult& r, std::unique_ptr<SinkPartial>& partial) const override {
    auto p = std::make_unique<HashPartial>();
    std::uint64_t h = mix(r.index, r.batch->first_report);
    for (std::size_t j = 0; j < r.metrics.size(); ++j) {
      const MetricBlock& m = r.metrics[j];
      for (char c : *r.scenario_names[j]) h = mix(h, static_cast<unsigned char>(c));
      h = hash_doubles(h, m.context), h = hash_doubles(h, m.difference), h = hash_doubles(h, m.pairwise);
      h = hash_doubles(h, m.separation), h = hash_doubles(h, m.head_stats), h = hash_doubles(h, m.pair_stats);
    }
    p->h = h;
    partial = std::move(p);
  }
  void consume(const BatchResult&, SinkPartial* partial) override {
    out_ = mix(out_, static_cast<HashPartial*>(partial)->h);
  }

 private:
  std::uint64_t& out_;
};

// Stage kinds in pipeline order: the breakdown a scaling table can show in one row.
const char* const kKinds[] = {"input", "generate", "axes", "weighting", "validate", "kernels", "attention", "forward", "heads", "prepare", "consume"};

// The copies' throughput (copies jobs in their wall time) over the first count's, the basis of
// every speedup in the table, the JSON and the report: with the first count at 1 thread (the
// usual --counts), the speedup fully independent work gets on this machine.
double ceiling_speedup(const ScalingPoint& p, const ScalingPoint& first) {
  return p.copies * first.wall_s / p.ceiling_wall_s;
}
// The engine's throughput at p.threads over the copies' throughput: (1 / wall) / (copies / their wall).
double share_of_ceiling(const ScalingPoint& p) { return p.ceiling_wall_s / (p.copies * p.wall_s); }

}  // namespace

std::unique_ptr<ResultSink> make_metric_hash(std::uint64_t& out) { return std::make_unique<MetricHash>(out); }

ProfileResult profile_from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    ProfileResult r;
    r.wall_s = j.at("wall_s").get<double>();
    r.threads = j.at("threads").get<unsigned>();
    r.batches = j.at("batches").get<std::uint64_t>();
    r.reports = j.at("reports").get<std::uint64_t>();
    r.groups = j.at("groups").get<std::uint64_t>();
    r.busy_s = j.at("busy_s").get<double>();
    r.cpu_s = j.at("cpu_s").get<double>();
    for (const auto& js : j.at("stages")) {
      StageProfile st;
      st.name = js.at("name").get<std::string>();
      st.kind = js.at("kind").get<std::string>();
      st.plugin = js.at("plugin").get<std::string>();
      st.serial = js.at("serial").get<bool>();
      st.active_s = js.at("active_s").get<double>();
      st.busy_s = js.at("busy_s").get<double>();
      st.cpu_s = js.at("cpu_s").get<double>();
      st.share = js.at("share").get<double>();
      st.batches = js.at("batches").get<std::uint64_t>();
      st.cycles = js.value("cycles", std::uint64_t(0));
      st.instructions = js.value("instructions", std::uint64_t(0));
      st.llc_misses = js.value("llc_misses", std::uint64_t(0));
      r.stages.push_back(std::move(st));
    }
    for (const auto& jt : j.at("thread_detail")) {
      ThreadProfile t;
      t.index = jt.at("index").get<unsigned>();
      t.busy_s = jt.at("busy_s").get<double>();
      t.cpu_s = jt.at("cpu_s").get<double>();
      t.idle_s = jt.at("idle_s").get<double>();
      t.invocations = jt.at("invocations").get<std::uint64_t>();
      r.thread_list.push_back(t);
    }
    r.counters = j.at("counters").at("available").get<bool>();
    r.counters_note = j.at("counters").at("note").get<std::string>();
    r.diagnosis = j.at("diagnosis").get<std::vector<std::string>>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("a run's profile JSON: ") + e.what());
  }
}

std::vector<std::string> stage_kinds(const std::vector<ScalingPoint>& points) {
  std::vector<std::string> kinds;
  for (const char* k : kKinds)
    for (const auto& p : points)
      if (std::any_of(p.profile.stages.begin(), p.profile.stages.end(), [&](const auto& s) { return s.kind == k; })) {
        kinds.push_back(k);
        break;
      }
  return kinds;
}

double stage_busy(const ScalingPoint& point, const std::string& kind) {
  double busy = 0;
  for (const auto& s : point.profile.stages)
    if (s.kind == kind) busy += s.busy_s;
  return busy;
}

namespace {

/// `text` wrapped at `width` columns (at spaces), later lines indented by `indent` spaces.
std::string wrap(const std::string& text, std::size_t width, std::size_t indent) {
  std::string out, line;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = text.find(' ', i);
    if (j == std::string::npos) j = text.size();
    const std::string word = text.substr(i, j - i);
    if (!line.empty() && line.size() + 1 + word.size() > width) out += line + "\n", line = std::string(indent, ' ');
    line += (line.empty() || line.back() == ' ' ? "" : " ") + word;
    i = j + 1;
  }
  return out + line + "\n";
}

}  // namespace

// Two tables that fit 100 columns: the counts (time, speedup, efficiency, identity, spread,
// ceiling), then the busy thread-seconds per stage, 8 stages per block.
std::string scaling_table(const std::vector<ScalingPoint>& points) {
  std::string out;
  char line[512];
  const std::vector<std::string> kinds = stage_kinds(points);  // only the kinds some count used
  const bool spread = !points.empty() && points[0].walls_s.size() > 1;
  const bool ceiling = !points.empty() && points[0].wall_s > 0 && std::any_of(points.begin(), points.end(), [](const ScalingPoint& p) { return p.copies; });
  const bool ranks = !points.empty() && points[0].ranks;
  const char* unit = ranks ? "rank" : "thread";
  std::snprintf(line, sizeof line, "%7s %9s %10s %7s %10s %9s", ranks ? "ranks" : "threads", spread ? "median s" : "wall s", "groups/s",
                "speedup", "efficiency", "identical");
  out += line;
  if (spread) out += "   min s   max s";
  if (ceiling) out += "  ceiling  of it";
  out += "\n";
  for (const auto& p : points) {
    const double speedup = p.wall_s > 0 && !points.empty() ? points[0].wall_s / p.wall_s : 0;
    // Efficiency against the first count: speedup / (count / first count).
    const double eff = count_of(p) && count_of(points[0]) ? speedup * count_of(points[0]) / count_of(p) : 0;
    std::snprintf(line, sizeof line, "%7u %9.3f %10s %6.2fx %9.1f%% %9s", count_of(p), p.wall_s,
                  detail::human_count(p.wall_s > 0 ? p.groups / p.wall_s : 0.0).c_str(), speedup, 100 * eff, p.identical ? "yes" : "NO");
    out += line;
    if (spread) {
      double lo = p.wall_s, hi = p.wall_s;
      for (double w : p.walls_s) lo = std::min(lo, w), hi = std::max(hi, w);
      std::snprintf(line, sizeof line, " %7.3f %7.3f", lo, hi);
      out += line;
    }
    if (ceiling) {
      if (p.copies && p.ceiling_wall_s > 0)
        std::snprintf(line, sizeof line, " %7.2fx %5.0f%%", ceiling_speedup(p, points[0]), 100 * share_of_ceiling(p));
      else
        std::snprintf(line, sizeof line, " %8s %6s", "-", "-");
      out += line;
    }
    out += "\n";
  }
  for (std::size_t first = 0; first < kinds.size(); first += 8) {
    const std::size_t last = std::min(kinds.size(), first + 8);
    out += first ? "\n" : ranks ? "\nrank 0's busy thread-seconds per stage\n" : "\nbusy thread-seconds per stage\n";
    std::snprintf(line, sizeof line, "%7s", ranks ? "ranks" : "threads"), out += line;
    for (std::size_t k = first; k < last; ++k) std::snprintf(line, sizeof line, " %10.10s", kinds[k].c_str()), out += line;
    out += "\n";
    for (const auto& p : points) {
      std::snprintf(line, sizeof line, "%7u", count_of(p)), out += line;
      for (std::size_t k = first; k < last; ++k) std::snprintf(line, sizeof line, " %10.3f", stage_busy(p, kinds[k])), out += line;
      out += "\n";
    }
  }
  if (!kinds.empty()) out += "\n";
  for (const auto& p : points)
    if (!p.profile.diagnosis.empty()) {
      std::snprintf(line, sizeof line, "%u %s%s: ", count_of(p), unit, count_of(p) == 1 ? "" : "s");
      out += wrap(line + p.profile.diagnosis[0], 100, 4);
    }
  if (ranks)
    out += wrap("each rank at " + std::to_string(points[0].threads) + " thread" + (points[0].threads == 1 ? "" : "s") +
                    "; a count's time is rank 0's engine time (pipeline start to the last chunk merged, the launcher's "
                    "start-up excluded); rank 0's stages hold its own share of the computing, the others' results "
                    "arriving (input) and the merge",
                100, 4);
  if (ceiling)
    for (const auto& p : points) {
      if (!p.copies || p.ceiling_wall_s <= 0 || p.wall_s <= 0) continue;
      const double share = share_of_ceiling(p), speedup = points[0].wall_s / p.wall_s;
      std::snprintf(line, sizeof line,
                    "%u threads: %.2fx the %u-thread run; %u independent 1-thread copies at once: %.2fx (the machine's "
                    "ceiling for this job now); the engine gets %.0f %% of it: %s",
                    p.threads, speedup, points[0].threads, p.copies, ceiling_speedup(p, points[0]), 100 * share,
                    speedup >= 0.98 * p.threads / points[0].threads ? "linear"
                    : share >= 0.95 ? "the rest of the way to linear is the machine's (shared caches, memory, the "
                                      "hypervisor), not the engine's"
                                    : "the engine loses the difference to parallel overhead (compare the stages' busy "
                                      "seconds with the 1-thread row)");
      out += wrap(line, 100, 4);
    }
  return out;
}

std::string scaling_json(const std::vector<ScalingPoint>& points, const std::string& job) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["job"] = job;
  bool all = true;
  ordered_json arr = ordered_json::array();
  for (const auto& p : points) {
    all = all && p.identical && p.copies_identical;
    const double speedup = p.wall_s > 0 ? points[0].wall_s / p.wall_s : 0;
    ordered_json e;
    if (p.ranks) e["ranks"] = p.ranks;  // and `threads` per rank
    e["threads"] = p.threads;
    e["wall_s"] = p.wall_s;
    e["reports"] = p.reports;
    e["groups"] = p.groups;
    e["groups_per_s"] = p.wall_s > 0 ? p.groups / p.wall_s : 0.0;
    e["speedup"] = speedup;
    e["efficiency"] = speedup * count_of(points[0]) / count_of(p);
    e["identical"] = p.identical;
    if (!p.walls_s.empty()) e["walls_s"] = p.walls_s;  // every run (--repeat); wall_s is the median run's
    if (p.copies && p.ceiling_wall_s > 0 && points[0].wall_s > 0)
      e["ceiling"] = {{"copies", p.copies},
                      {"wall_s", p.ceiling_wall_s},
                      {"walls_s", p.ceiling_walls_s},
                      {"speedup", ceiling_speedup(p, points[0])},
                      {"engine_share", share_of_ceiling(p)},
                      {"identical", p.copies_identical}};
    e["profile"] = ordered_json::parse(p.profile_json);
    arr.push_back(e);
  }
  j["outputs_identical"] = all;
  j["counts"] = arr;
  return j.dump(2) + "\n";
}

}  // namespace headsep::prof
