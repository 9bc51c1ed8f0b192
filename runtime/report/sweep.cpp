// headsep sweep: one report set over a range of a plugin parameter; separation per value.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "headsep/error.hpp"
#include "headsep/summary.hpp"
#include "report/report.hpp"
#include "support/text_util.hpp"

namespace headsep::report {

SweepSpec parse_sweep(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UsageError("--vary " + text + ": expected KEY=LO:HI:N or KEY=V1,V2,...");
  SweepSpec s;
  s.key = text.substr(0, eq);
  const std::string spec = text.substr(eq + 1);
  auto parts = split(spec, ':');
  if (parts.size() == 3) {
    auto lo = parse_finite_double(parts[0]), hi = parse_finite_double(parts[1]);
    auto n = parse_finite_double(parts[2]);
    if (!lo || !hi || !n || *n < 1 || *n > 1000 || *n != std::floor(*n))
      throw UsageError("--vary " + text + ": LO:HI:N needs two numbers and a count N from 1 to 1000");
    const int count = int(*n);
    if (count == 1 && *lo != *hi) throw UsageError("--vary " + text + ": one value (N = 1) needs LO = HI");
    const double step = count > 1 ? (*hi - *lo) / (count - 1) : 0.0;
    const bool integers = *lo == std::floor(*lo) && step == std::floor(step) && std::fabs(*lo) < 1e15 && std::fabs(*hi) < 1e15;
    for (int i = 0; i < count; ++i) {
      const double v = i + 1 == count ? *hi : *lo + step * i;  // the last value is HI exactly
      std::string out;
      if (integers) out = std::to_string(static_cast<long long>(v));
      else append_py_float(out, v);
      s.values.push_back(out);
    }
  } else if (parts.size() == 1) {
    const char sep = spec.find(';') != std::string::npos ? ';' : ',';
    for (auto v : split(spec, sep)) {
      v = trim(v);
      if (v.empty()) throw UsageError("--vary " + text + ": an empty value in the list");
      s.values.emplace_back(v);
    }
  } else {
    throw UsageError("--vary " + text + ": expected KEY=LO:HI:N or KEY=V1,V2,...");
  }
  return s;
}

Sweep make_sweep(const SweepSpec& spec) {
  Sweep sw;
  sw.parameter = spec.key;
  sw.values = spec.values;
  bool all = true;
  for (const auto& v : spec.values) {
    sw.numeric.push_back(parse_finite_double(v));
    all = all && sw.numeric.back().has_value();
  }
  if (!all)
    for (auto& x : sw.numeric) x.reset();
  sw.stats.resize(spec.values.size());
  sw.seconds.resize(spec.values.size());
  return sw;
}

void add_sweep_run(Sweep& sw, std::size_t i, const Summary& summary, double seconds) {
  sw.seconds[i] = seconds;
  for (const auto& s : summary.scenarios()) {
    std::size_t j = 0;
    while (j < sw.scenarios.size() && sw.scenarios[j] != s.name) ++j;
    if (j == sw.scenarios.size()) {
      sw.scenarios.push_back(s.name);
      for (auto& row : sw.stats) row.resize(sw.scenarios.size());
    }
    const auto& m = s.metrics[0];
    Stats st;
    st.count = m.moments.count();
    const bool any = st.count > 0;
    st.mean = any ? m.moments.mean() : 0.0;
    st.std = m.moments.stddev();
    st.min = any ? m.moments.min() : 0.0;
    st.max = any ? m.moments.max() : 0.0;
    if (m.sketch.count())
      st.p01 = m.sketch.quantile(0.01), st.p10 = m.sketch.quantile(0.1), st.p50 = m.sketch.quantile(0.5),
      st.p90 = m.sketch.quantile(0.9), st.p99 = m.sketch.quantile(0.99);
    st.exact = m.sketch.exact();
    sw.stats[i][j] = st;
  }
  for (auto& row : sw.stats) row.resize(sw.scenarios.size());
}

std::string sweep_json(const Sweep& sw) {
  using nlohmann::ordered_json;
  ordered_json root;
  root["parameter"] = sw.parameter;
  root["values"] = sw.values;
  ordered_json runs = ordered_json::array();
  for (std::size_t i = 0; i < sw.values.size(); ++i) {
    ordered_json r;
    r["value"] = sw.values[i];
    if (sw.numeric[i]) r["numeric_value"] = *sw.numeric[i];
    ordered_json sc = ordered_json::array();
    for (std::size_t j = 0; j < sw.scenarios.size(); ++j) {
      if (j >= sw.stats[i].size() || !sw.stats[i][j]) continue;
      const Stats& st = *sw.stats[i][j];
      sc.push_back({{"scenario", sw.scenarios[j]},
                    {"count", st.count},
                    {"head_separation",
                     {{"mean", st.mean}, {"std", st.std}, {"min", st.min}, {"max", st.max}, {"p01", st.p01},
                      {"p10", st.p10}, {"p50", st.p50}, {"p90", st.p90}, {"p99", st.p99}, {"quantiles_exact", st.exact}}}});
    }
    r["scenarios"] = sc;
    runs.push_back(r);
  }
  root["runs"] = runs;
  return root.dump(2) + "\n";
}

std::string sweep_table(const Sweep& sw) {
  std::string out = "head_separation per scenario against " + sw.parameter + "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-14s %-30s %10s %9s %9s %9s %9s %9s\n", sw.parameter.size() <= 14 ? sw.parameter.c_str() : "value",
                "scenario", "reports", "mean", "p10", "p50", "p90", "seconds");
  out += line;
  for (std::size_t i = 0; i < sw.values.size(); ++i)
    for (std::size_t j = 0; j < sw.scenarios.size(); ++j) {
      if (j >= sw.stats[i].size() || !sw.stats[i][j]) continue;
      const Stats& st = *sw.stats[i][j];
      std::snprintf(line, sizeof line, "%-14s %-30s %10llu %9.4f %9.4f %9.4f %9.4f %9.3f\n", sw.values[i].c_str(),
                    sw.scenarios[j].c_str(), static_cast<unsigned long long>(st.count), st.mean, st.p10, st.p50, st.p90,
                    sw.seconds[i]);
      out += line;
    }
  return out;
}

}  // namespace headsep::report
