// The profile as people read it: the table printed after a run (Profiler::table) and the
// summary's "profile" member (Profiler::json), both from ProfileResult; and the model forward's
// part clock (ForwardClock).
#include <time.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "headsep/profile.hpp"

namespace headsep {

const char* to_string(ForwardPart p) noexcept {
  switch (p) {
    case ForwardPart::embed: return "embeddings (+ rotary tables)";
    case ForwardPart::norm: return "norms";
    case ForwardPart::products: return "products (weights)";
    case ForwardPart::rope: return "RoPE + K copies";
    case ForwardPart::attention: return "attention + head metrics";
    case ForwardPart::activation: return "activations (GELU, SiLU x up)";
    case ForwardPart::residual: return "residual adds + copies";
    case ForwardPart::count: break;
  }
  return "?";
}

void ForwardClock::lap(int next) noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::int64_t now = std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  if (current_ >= 0) seconds[current_] += double(now - last_) * 1e-9;
  last_ = now, current_ = next;
}

std::string Profiler::table() const {
  const ProfileResult& r = result();
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "profile: %.3f s wall, %u thread%s, %llu batches, %.3g reports/s, %.3g groups/s\n",
                r.wall_s, r.threads, r.threads == 1 ? "" : "s", static_cast<unsigned long long>(r.batches), r.wall_s > 0 ? r.reports / r.wall_s : 0.0,
                r.wall_s > 0 ? r.groups / r.wall_s : 0.0);
  out += line;
  std::snprintf(line, sizeof line, "%-44s %9s %9s %9s %6s %8s%s\n", "stage", "active s", "busy s", "cpu s", "share",
                "batches", r.counters ? "       IPC  LLC miss/batch" : "");
  out += line;
  for (const auto& st : r.stages) {
    std::string name = st.name + (st.serial ? " (serial)" : "");
    std::snprintf(line, sizeof line, "%-44s %9.3f %9.3f %9.3f %5.1f%% %8llu", name.c_str(), st.active_s, st.busy_s,
                  st.cpu_s, 100 * st.share, static_cast<unsigned long long>(st.batches));
    out += line;
    if (r.counters) {
      std::snprintf(line, sizeof line, " %9.2f %15.0f", st.cycles ? double(st.instructions) / double(st.cycles) : 0.0,
                    st.batches ? double(st.llc_misses) / double(st.batches) : 0.0);
      out += line;
    }
    out += "\n";
    if (st.kind == "forward")  // its parts below it (ForwardClock), in the busy and share columns
      for (const auto& [part, sec] : r.forward_parts) {
        std::snprintf(line, sizeof line, "  - %-40s %9s %9.3f %9s %5.1f%%\n", part.c_str(), "", sec, "",
                      r.busy_s > 0 ? 100 * sec / r.busy_s : 0.0);
        out += line;
      }
  }
  std::map<std::string, double> plugins;
  for (const auto& st : r.stages)
    if (!st.plugin.empty()) plugins[st.plugin] += st.busy_s;
  for (const auto& [p, busy] : plugins) {
    std::snprintf(line, sizeof line, "  %s: %.3f s busy, %.1f%%\n", p.c_str(), busy, r.busy_s > 0 ? 100 * busy / r.busy_s : 0.0);
    out += line;
  }
  for (const auto& t : r.thread_list) {
    std::snprintf(line, sizeof line, "thread %-3u busy %8.3f s (%5.1f%%), cpu %8.3f s, idle %8.3f s, %llu invocations\n",
                  t.index, t.busy_s, r.wall_s > 0 ? 100 * t.busy_s / r.wall_s : 0.0, t.cpu_s, t.idle_s,
                  static_cast<unsigned long long>(t.invocations));
    out += line;
  }
  out += r.counters_note + "\n";
  for (std::size_t i = 0; i < r.diagnosis.size(); ++i) out += (i == 0 ? "diagnosis: " : "           ") + r.diagnosis[i] + "\n";
  return out;
}

std::string Profiler::json() const {
  using nlohmann::ordered_json;
  const ProfileResult& r = result();
  ordered_json j;
  j["wall_s"] = r.wall_s;
  j["threads"] = r.threads;
  j["batches"] = r.batches;
  j["reports"] = r.reports;
  j["groups"] = r.groups;
  j["reports_per_s"] = r.wall_s > 0 ? r.reports / r.wall_s : 0.0;
  j["groups_per_s"] = r.wall_s > 0 ? r.groups / r.wall_s : 0.0;
  j["busy_s"] = r.busy_s;
  j["cpu_s"] = r.cpu_s;
  ordered_json stages = ordered_json::array();
  for (const auto& st : r.stages) {
    ordered_json js;
    js["name"] = st.name;
    js["kind"] = st.kind;
    js["plugin"] = st.plugin;
    js["serial"] = st.serial;
    js["active_s"] = st.active_s;
    js["busy_s"] = st.busy_s;
    js["cpu_s"] = st.cpu_s;
    js["share"] = st.share;
    js["batches"] = st.batches;
    if (r.counters) {
      js["cycles"] = st.cycles;
      js["instructions"] = st.instructions;
      js["ipc"] = st.cycles ? double(st.instructions) / double(st.cycles) : 0.0;
      js["llc_misses"] = st.llc_misses;
    }
    stages.push_back(js);
  }
  j["stages"] = stages;
  ordered_json threads = ordered_json::array();
  for (const auto& t : r.thread_list)
    threads.push_back({{"index", t.index}, {"busy_s", t.busy_s}, {"cpu_s", t.cpu_s}, {"idle_s", t.idle_s},
                       {"invocations", t.invocations}});
  j["thread_detail"] = threads;
  j["counters"] = {{"available", r.counters}, {"note", r.counters_note}};
  j["diagnosis"] = r.diagnosis;
  if (!r.forward_parts.empty()) {
    ordered_json parts;
    for (const auto& [name, sec] : r.forward_parts) parts[name] = sec;
    j["forward_parts_s"] = parts;
  }
  return j.dump(2);
}

}  // namespace headsep
