// The profiler: per-thread stage clocks (no shared writes on the hot path except the per-stage
// "active" tracker), hardware counters through perf_event_open, the table, JSON and trace.
#include <cxxabi.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "headsep/run.hpp"
#include "profile/stage_timer.hpp"

namespace headsep {
namespace prof {
namespace {

std::int64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
std::int64_t cpu_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::atomic<std::uint64_t> g_generation{0};

struct Acc {
  std::int64_t wall = 0, cpu = 0;
  std::uint64_t batches = 0, last = 0;  // last = batch + 1 of the last visit (counts distinct batches)
  std::uint64_t ctr[3] = {};
};

constexpr int kCounters = 3;  // cycles, instructions, LLC misses

struct Thread : ThreadRec {
  unsigned index = 0;
  int cur = -1;
  bool started = false;  // the invocation's first stage began (its clock read starts the invocation)
  std::int64_t t_wall = 0, t_cpu = 0, inv_wall = 0, inv_cpu = 0;
  std::int64_t busy_wall = 0, busy_cpu = 0;
  std::uint64_t invocations = 0;
  std::uint64_t ctr_last[kCounters] = {};
  int fd[kCounters] = {-1, -1, -1};
  bool counting = false;
  Acc acc[kStages];
  double parts[std::size_t(ForwardPart::count)] = {};  // the model forward's (ForwardClock)
  ~Thread() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
};

struct Active {  // wall time during which at least one thread is in the stage
  std::mutex m;
  int inside = 0;
  std::int64_t since = 0, total = 0;
};

struct Event {
  std::uint64_t batch, reports;
  std::int64_t start, dur;
  std::uint32_t thread;
  std::uint16_t stage;
};

long perf_open(std::uint64_t config, int group) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_HARDWARE;
  a.config = config;
  a.exclude_kernel = 1;  // user space only: what perf_event_paranoid = 2 allows without privileges
  a.exclude_hv = 1;
  a.read_format = PERF_FORMAT_GROUP;
  return ::syscall(SYS_perf_event_open, &a, 0, -1, group, 0);
}

const std::uint64_t kConfigs[kCounters] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS,
                                           PERF_COUNT_HW_CACHE_MISSES};

// Opens the group on the calling thread; returns "" or why not (errno in *err).
std::string open_group(int* fd, int* err_out = nullptr) {
  for (int i = 0; i < kCounters; ++i) {
    const long f = perf_open(kConfigs[i], i == 0 ? -1 : fd[0]);
    if (f < 0) {
      const int err = errno;
      if (err_out) *err_out = err;
      for (int j = 0; j < i; ++j) ::close(fd[j]), fd[j] = -1;
      return std::string("perf_event_open(") + (i == 0 ? "cycles" : i == 1 ? "instructions" : "LLC misses") +
             ") failed: " + std::strerror(err);
    }
    fd[i] = int(f);
  }
  return {};
}

bool read_group(const int* fd, std::uint64_t* out) {
  std::uint64_t buf[1 + kCounters];
  if (::read(fd[0], buf, sizeof buf) != ssize_t(sizeof buf) || buf[0] != kCounters) return false;
  for (int i = 0; i < kCounters; ++i) out[i] = buf[1 + i];
  return true;
}

std::string paranoid_level() {
  std::ifstream f("/proc/sys/kernel/perf_event_paranoid");
  std::string v;
  return (f >> v) ? v : std::string("unknown");
}

}  // namespace

/// A sink's name for the table: its class without namespaces ("Summary", "CsvWriter").
std::string sink_name(const ResultSink& s) {
  int status = 0;
  const char* mangled = typeid(s).name();
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string n = status == 0 && d ? d : mangled;
  std::free(d);
  const auto colon = n.rfind("::");
  return colon == std::string::npos ? n : n.substr(colon + 2);
}

}  // namespace prof

using namespace prof;


struct Profiler::Impl::State {
  std::uint64_t generation = ++g_generation;
  RunSetup setup;
  std::string model;  // run_model's model; empty: the engine
  std::int64_t t0 = 0;
  std::mutex threads_mutex;
  std::vector<std::unique_ptr<Thread>> threads;
  Active active[kStages];
  bool counters_on = false;
  std::atomic<bool> counters_failed{false};
  std::string counters_note;
  // trace
  std::mutex trace_mutex;
  std::vector<Event> events;
  std::uint64_t stride = 1;
  std::uint64_t max_index = 0;
  std::vector<std::string> stage_names;  // resolved by end_run
};

namespace {
thread_local std::uint64_t tl_generation = 0;
thread_local Thread* tl_thread = nullptr;
}  // namespace

Profiler::Impl::Impl(ProfileOptions o) : opt(o), s(new State) {}
Profiler::Impl::~Impl() { delete s; }

Profiler::Profiler(ProfileOptions options) : impl_(std::make_unique<Impl>(options)) {}
Profiler::~Profiler() = default;
const ProfileResult& Profiler::result() const { return impl_->result; }

void Profiler::Impl::begin_run(const RunSetup& setup, const std::string& model) {
  s->setup = setup;
  s->model = model;
  s->counters_on = false;
  if (opt.counters) {
    int fd[kCounters] = {-1, -1, -1}, err = 0;
    const std::string why = open_group(fd, &err);
    if (why.empty()) {
      s->counters_on = true;
      s->counters_note = "hardware counters: user-space cycles, instructions, LLC misses per stage (perf_event_open)";
      for (int f : fd) ::close(f);
    } else {
      s->counters_note = "hardware counters unavailable: " + why + " (perf_event_paranoid = " + paranoid_level() +
                         (err == ENOENT || err == EOPNOTSUPP ? "; no PMU is exposed to this machine, e.g. a VM without vPMU)"
                                                                 : ")");
    }
  } else {
    s->counters_note = "hardware counters: not asked for";
  }
  s->t0 = now_ns();
}

prof::ThreadRec* Profiler::Impl::enter(std::uint64_t batch) {
  Thread* t = tl_thread;
  if (tl_generation != s->generation || !t) {
    auto rec = std::make_unique<Thread>();
    t = rec.get();
    if (s->counters_on) {
      const std::string why = open_group(t->fd);
      if (why.empty()) t->counting = true;
      else if (!s->counters_failed.exchange(true)) {
        std::lock_guard lock(s->threads_mutex);
        s->counters_note = "hardware counters unavailable on a worker thread: " + why;
      }
    }
    std::lock_guard lock(s->threads_mutex);
    t->index = static_cast<unsigned>(s->threads.size());
    s->threads.push_back(std::move(rec));
    tl_thread = t;
    tl_generation = s->generation;
  }
  t->batch = batch;
  t->reports = 0;
  t->cur = -1;
  t->started = false;
  ++t->invocations;
  return t;
}

void Profiler::Impl::lap(ThreadRec& rec, int next) {
  Thread& t = static_cast<Thread&>(rec);
  const std::int64_t c = cpu_ns();
  std::uint64_t ctr[kCounters];
  const bool counted = t.counting && read_group(t.fd, ctr);
  if (t.counting && !counted) t.counting = false, s->counters_failed = true;
  // One wall clock read, under the locks of the stage ending and the stage starting (taken in id
  // order), ends one and starts the other: stages tile the invocation, and each stage's "active"
  // union sees its updates in clock order even when a thread is preempted around here.
  std::int64_t w;
  {
    Active* a = t.cur >= 0 ? &s->active[t.cur] : nullptr;
    Active* b = next >= 0 && next != t.cur ? &s->active[next] : nullptr;
    if (a && b && b < a) std::swap(a, b);
    std::unique_lock la = a ? std::unique_lock(a->m) : std::unique_lock<std::mutex>();
    std::unique_lock lb = b ? std::unique_lock(b->m) : std::unique_lock<std::mutex>();
    w = now_ns();
    if (t.cur >= 0 && next != t.cur) {
      Active& act = s->active[t.cur];
      if (--act.inside == 0) act.total += w - act.since;
    }
    if (next >= 0 && next != t.cur) {
      Active& act = s->active[next];
      if (act.inside++ == 0) act.since = w;
    }
  }
  if (t.cur >= 0) {
    Acc& a = t.acc[t.cur];
    a.wall += w - t.t_wall;
    a.cpu += c - t.t_cpu;
    if (a.last != t.batch + 1) ++a.batches, a.last = t.batch + 1;
    if (counted)
      for (int i = 0; i < kCounters; ++i) a.ctr[i] += ctr[i] - t.ctr_last[i];
    if (opt.trace) {
      std::lock_guard lock(s->trace_mutex);
      const std::uint64_t full = opt.trace_full_batches, sampled = std::max<std::size_t>(1, opt.trace_sampled_batches);
      if (t.batch >= full && t.batch > s->max_index) {
        s->max_index = t.batch;
        // Keep at most `sampled` batch indices in [full, max_index]: double the stride and drop
        // the events of indices that are no longer multiples of it.
        bool grew = false;
        while ((s->max_index - full) / s->stride + 1 > sampled) s->stride *= 2, grew = true;
        if (grew)
          s->events.erase(std::remove_if(s->events.begin(), s->events.end(),
                                         [&](const Event& e) { return e.batch >= full && (e.batch - full) % s->stride != 0; }),
                          s->events.end());
      }
      if (t.batch < full || (t.batch - full) % s->stride == 0)
        s->events.push_back({t.batch, t.reports, t.t_wall - s->t0, w - t.t_wall, t.index, static_cast<std::uint16_t>(t.cur)});
    }
  } else if (!t.started && next >= 0) {
    t.started = true;
    t.inv_wall = w, t.inv_cpu = c;
  }
  t.cur = next;
  t.t_wall = w;
  t.t_cpu = c;
  if (counted) std::copy(ctr, ctr + kCounters, t.ctr_last);
}

void Profiler::Impl::add_parts(ThreadRec& rec, const ForwardClock& clock) {
  Thread& t = static_cast<Thread&>(rec);
  for (std::size_t p = 0; p < std::size_t(ForwardPart::count); ++p) t.parts[p] += clock.seconds[p];
}

void Profiler::Impl::drop(ThreadRec& rec) {
  Thread& t = static_cast<Thread&>(rec);
  if (t.cur >= 0) {
    Active& act = s->active[t.cur];
    std::lock_guard lock(act.m);
    if (--act.inside == 0) act.total += std::max<std::int64_t>(0, now_ns() - act.since);
  }
  t.cur = -1;
  t.started = false;
  --t.invocations;
}

void Profiler::Impl::leave(ThreadRec& rec) {
  Thread& t = static_cast<Thread&>(rec);
  if (!t.started) return;
  lap(t, -1);
  t.busy_wall += t.t_wall - t.inv_wall;
  t.busy_cpu += t.t_cpu - t.inv_cpu;
}

namespace {

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f %%", 100 * x);
  return b;
}

// The one-line diagnosis (and supporting lines): what limits the run.
std::vector<std::string> diagnose(const ProfileResult& r, const RunSetup& setup) {
  std::vector<std::string> out;
  if (r.busy_s <= 0 || r.wall_s <= 0) return {"nothing ran long enough to measure"};
  // 1. A serial stage active most of the wall time bounds the pipeline whatever the threads.
  for (const auto& st : r.stages) {
    if (!st.serial) continue;
    const double frac = st.active_s / r.wall_s;
    if (frac < 0.75) continue;
    std::string what = st.kind == "input" ? (setup.random_access ? "handing out batch indices"
                                                                  : "reading and parsing the input" +
                                                                        (st.plugin.empty() ? std::string() : " (" + st.plugin + ")"))
                                          : "merging and writing results in order (" + st.name.substr(st.name.find(':') + 2) + ")";
    out.push_back("the serial " + st.name + " stage was busy " + pct(frac) + " of the wall time: " + what +
                  " limits scaling");
  }
  // 2. One plugin or one stage taking most of the threads' time.
  std::map<std::string, std::pair<double, double>> by_plugin;  // plugin -> (busy, cpu)
  for (const auto& st : r.stages)
    if (!st.plugin.empty()) by_plugin[st.plugin].first += st.busy_s, by_plugin[st.plugin].second += st.cpu_s;
  const StageProfile* top = nullptr;
  for (const auto& st : r.stages)
    if (!top || st.busy_s > top->busy_s) top = &st;
  std::string dominant;
  for (const auto& [plugin, t] : by_plugin) {
    const double share = t.first / r.busy_s;
    if (share < 0.5) continue;
    dominant = plugin + " took " + pct(share) + " of the threads' busy time";
    if (r.cpu_s > 0) dominant += " and " + pct(t.second / r.cpu_s) + " of the CPU time";
    if (t.second < 0.5 * t.first) dominant += " (it waits more than it computes: sleep, I/O or locks)";
  }
  if (dominant.empty() && top && top->share >= 0.5) {
    dominant = top->name + " took " + pct(top->share) + " of the threads' busy time";
    if (!top->plugin.empty()) dominant += " (" + top->plugin + ")";
  }
  if (!dominant.empty()) out.push_back(dominant);
  // 3. Threads idle: too few batches, or starved by the serial stages.
  const double util = r.busy_s / (double(r.threads) * r.wall_s);
  if (r.threads > 1 && util < 0.8) {
    std::string why = r.batches < 2 * std::uint64_t(r.threads)
                          ? "only " + std::to_string(r.batches) + (r.batches == 1 ? " batch for " : " batches for ") + std::to_string(r.threads) +
                                " threads (a smaller --chunk gives more)"
                          : "they wait for the serial stages or for batches in flight";
    out.push_back("threads were busy " + pct(util) + " of " + std::to_string(r.threads) + " x the wall time: " + why);
  }
  // 4. Busy but not on a CPU: the machine is shared, or a stage blocks.
  if (r.cpu_s < 0.85 * r.busy_s && dominant.find("waits") == std::string::npos)
    out.push_back("threads ran on a CPU " + pct(r.cpu_s / r.busy_s) +
                  " of their busy time: other processes compete for the cores, or a stage blocks");
  if (out.empty() && top)
    out.push_back("no single limit: the largest stage, " + top->name + ", took " + pct(top->share) +
                  " of the threads' busy time; threads were busy " + pct(util) + " of the wall time");
  return out;
}

}  // namespace

void Profiler::Impl::end_run(const RunStats& stats, const std::vector<std::string>& scenario_names) {
  ProfileResult& r = result;
  r = ProfileResult{};
  const RunSetup& su = s->setup;
  r.wall_s = stats.seconds;
  r.threads = su.threads;
  r.batches = stats.batches, r.reports = stats.reports, r.groups = stats.groups;
  r.counters = s->counters_on && !s->counters_failed;
  r.counters_note = s->counters_on && s->counters_failed && s->counters_note.rfind("hardware counters:", 0) == 0
                        ? "hardware counters: a counter read failed; counts left out"
                        : s->counters_note;
  std::lock_guard lock(s->threads_mutex);
  s->stage_names.assign(kStages, std::string());
  for (int id = 0; id < kStages; ++id) {
    StageProfile st;
    std::int64_t wall = 0, cpu = 0;
    std::uint64_t ctr[kCounters] = {};
    for (const auto& t : s->threads) {
      const Acc& a = t->acc[id];
      wall += a.wall, cpu += a.cpu, st.batches += a.batches;
      for (int i = 0; i < kCounters; ++i) ctr[i] += a.ctr[i];
    }
    const bool model = !s->model.empty();
    if (id == kInput) {
      st.kind = "input", st.serial = true;
      st.name = su.random_access ? "input (dispatch)" : model ? "input (read + parse + tokenize)" : "input (read + parse)";
      if (!su.random_access) st.plugin = su.source_label;
    } else if (id == kGenerate) {
      st.kind = "generate", st.name = model ? "generate (+ tokenize)" : "generate", st.plugin = su.source_label;
    } else if (id == kAxes) {
      st.kind = "axes", st.name = model ? "token ids + axes projection" : "axes projection";
    } else if (id == kForward) {
      st.kind = "forward", st.name = "model forward (" + s->model + ")";
    } else if (id == kHeads) {
      st.kind = "heads", st.name = "head metrics (sums, sketches, top)";
    } else if (model && id == kConsume0) {  // run_model: consume(0) is the merge, consume(k + 1) sink k
      st.kind = "consume", st.serial = true, st.name = "merge: scenario sums in batch order";
    } else if (id == kValidate) {
      st.kind = "validate", st.name = "validation";
    } else if (id == kKernels) {
      st.kind = su.attention ? "attention" : "kernels";
      st.name = su.attention ? "attention (projections + fused kernels)" : "metric kernels";
    } else if (id < kConsume0) {
      const std::size_t k = std::size_t(id - kPrepare0);
      st.kind = "prepare", st.name = "sink prepare: " + (k < su.sink_names.size() ? su.sink_names[k] : "?");
    } else if (id < kWeighting0) {
      const std::size_t k = std::size_t(id - kConsume0);
      st.kind = "consume", st.serial = true;
      st.name = "sink consume: " + (k < su.sink_names.size() ? su.sink_names[k] : "?");
    } else if (id == kWeightingAll) {
      st.kind = "weighting", st.plugin = su.weighting_label;
      st.name = "weighting [every scenario, one call]";
    } else {
      const std::size_t k = std::size_t(id - kWeighting0);
      st.kind = "weighting", st.plugin = su.weighting_label;
      st.name = "weighting [" + (k == kMaxScenarios ? std::string("other scenarios") : k < scenario_names.size() ? scenario_names[k] : "#" + std::to_string(k)) + "]";
    }
    s->stage_names[id] = st.name;
    if (st.batches == 0 && wall == 0) continue;
    st.busy_s = wall * 1e-9, st.cpu_s = cpu * 1e-9;
    st.active_s = s->active[id].total * 1e-9;
    st.cycles = ctr[0], st.instructions = ctr[1], st.llc_misses = ctr[2];
    st.cycles = r.counters ? st.cycles : 0, st.instructions = r.counters ? st.instructions : 0;
    st.llc_misses = r.counters ? st.llc_misses : 0;
    r.busy_s += st.busy_s, r.cpu_s += st.cpu_s;
    r.stages.push_back(std::move(st));
  }
  for (auto& st : r.stages) st.share = r.busy_s > 0 ? st.busy_s / r.busy_s : 0;
  for (const auto& t : s->threads) {
    ThreadProfile tp;
    tp.index = t->index;
    tp.busy_s = t->busy_wall * 1e-9, tp.cpu_s = t->busy_cpu * 1e-9;
    tp.idle_s = std::max(0.0, r.wall_s - tp.busy_s);
    tp.invocations = t->invocations;
    r.thread_list.push_back(tp);
  }
  r.diagnosis = diagnose(r, su);
  r.forward_parts.clear();
  if (!s->model.empty()) {
    double sum = 0;
    for (std::size_t p = 0; p < std::size_t(ForwardPart::count); ++p) {
      double v = 0;
      for (const auto& t : s->threads) v += t->parts[p];
      r.forward_parts.emplace_back(to_string(ForwardPart(p)), v);
      sum += v;
    }
    if (sum == 0) r.forward_parts.clear();
  }
  std::lock_guard tl(s->trace_mutex);
  r.trace_events = s->events.size();
  r.trace_stride = s->stride;
  std::vector<std::uint64_t> seen;
  for (const auto& e : s->events) seen.push_back(e.batch);
  std::sort(seen.begin(), seen.end());
  r.trace_batches = std::uint64_t(std::unique(seen.begin(), seen.end()) - seen.begin());
}

std::string Profiler::trace_json() const {
  const auto& s = *impl_->s;
  const auto& names = s.stage_names;
  std::unordered_map<std::uint64_t, std::uint64_t> reports;  // batch -> reports (input events of
  for (const auto& e : s.events) reports[e.batch] = std::max(reports[e.batch], e.reports);  // random-access sources know none)
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"headsep --trace\",";
  char line[512];
  std::snprintf(line, sizeof line,
                "\"sampling\":\"every batch below %zu, then batches %zu + k*%llu (at most %zu of them)\"},\"traceEvents\":[\n",
                impl_->opt.trace_full_batches, impl_->opt.trace_full_batches, static_cast<unsigned long long>(s.stride),
                impl_->opt.trace_sampled_batches);
  out += line;
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"headsep\"}}";
  for (const auto& t : s.threads) {
    std::snprintf(line, sizeof line, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":\"thread %u\"}}",
                  t->index, t->index);
    out += line;
  }
  auto escaped = [](const std::string& x) {
    std::string e;
    for (char c : x) {
      if (c == '"' || c == '\\') e += '\\', e += c;
      else if (static_cast<unsigned char>(c) < 0x20) {
        char u[8];
        std::snprintf(u, sizeof u, "\\u%04x", c);
        e += u;
      } else e += c;
    }
    return e;
  };
  std::vector<std::string> esc(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) esc[i] = escaped(names[i]);
  for (const auto& e : s.events) {
    const std::string& n = e.stage < esc.size() ? esc[e.stage] : esc.at(0);
    out += ",\n{\"name\":\"" + n;
    std::snprintf(line, sizeof line,
                  "\",\"cat\":\"stage\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":%u,"
                  "\"args\":{\"batch\":%llu,\"reports\":%llu}}",
                  e.start * 1e-3, e.dur * 1e-3, e.thread, static_cast<unsigned long long>(e.batch),
                  static_cast<unsigned long long>(reports[e.batch]));
    out += line;
  }
  out += "\n]}\n";
  return out;
}

}  // namespace headsep
