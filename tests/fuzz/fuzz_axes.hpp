// Fuzz harness: `--axes` expressions (runtime/io/axes.cpp). The whole input is the expression. A
// parsed spec must be what parse_axes promises (named, unique axes; every term a non-empty
// column with a finite coefficient); binding it to a fixed schema and projecting a small batch
// must either work or refuse with an Error.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "headsep/axes.hpp"

namespace headsep::fuzz::axes {

inline int fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  accepted([&] {
    const auto parsed = parse_axes(spec);
    expect(!parsed.empty(), "parse_axes returned no axis");
    std::set<std::string> names;
    for (const auto& a : parsed) {
      expect(!a.name.empty(), "an axis without a name");
      expect(names.insert(a.name).second, "axis '" + a.name + "' returned twice");
      expect(!a.terms.empty(), "axis '" + a.name + "' without terms");
      for (const auto& [col, coef] : a.terms) {
        expect(!col.empty(), "axis '" + a.name + "': a term without a column");
        expect(coef - coef == 0, "axis '" + a.name + "': non-finite coefficient for column '" + col + "'");
      }
    }
    const auto cols = axis_columns(parsed);
    expect(std::set<std::string>(cols.begin(), cols.end()).size() == cols.size(), "axis_columns lists a column twice");

    static const std::vector<std::string> kSchema = {"decision_axis", "evidence_axis", "condition_axis", "risk", "cost",
                                                     "x[0]", "비용"};
    const AxisMap map = AxisMap::bind(parsed, kSchema);
    expect(map.size() == parsed.size(), "bind changed the number of axes");
    ReportBatch b;
    b.token_offset = {0, 1, 3};
    b.features.assign(kSchema.size(), std::vector<double>{0.5, -1.25, 3.0});
    std::vector<std::vector<double>> out64;
    std::vector<std::vector<float>> out32;
    map.project(b, out64);
    map.project(b, out32);
    expect(out64.size() == map.size() && out32.size() == map.size(), "project: wrong number of axes");
    for (const auto& row : out64) expect(row.size() == b.n_tokens(), "project: wrong row length");
  });
  return 0;
}

}  // namespace headsep::fuzz::axes
