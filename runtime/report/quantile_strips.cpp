// Quantile strips: per head, one statistic over the reports (p01–p99 line, p10–p90 box, p50 tick,
// mean dot): entropy and confidence of attention schemes, entropy and separation per model layer.
#include "report/figures.hpp"
#include "report/svg.hpp"

namespace headsep::report {

Figure strips(const ReportData& d, std::size_t si, const std::string& stat, const std::vector<Stats>& v, double lo,
              double hi, std::uint32_t first_head, const std::string& section) {
  const auto& s = d.scenarios[si];
  const Ticks t = nice_ticks(lo, hi);
  const double W = 560, L = 150, R = 540, T = 50, row = 22;
  const double B = T + row * double(v.size());
  const Scale sx{t.lo, t.hi, L, R};
  Figure f;
  f.id = "attn-" + stat + "-" + std::to_string(si);
  f.section = section;
  f.title = stat + " per head: " + cut(s.name, 30);
  std::string o = svg_open(f.id, "strips", W, B + 48);
  o += text(8, 18, escape(f.title), "font-size=\"14\" font-weight=\"bold\" class=\"fig-title\"");
  o += text(8, 36, std::string("line p01–p99 · box p10–p90 · tick p50 · dot mean") + (lo > 0 ? " · axis: this figure's range" : ""),
            "fill=\"#444\"");
  o += x_axis(t, sx, T, B,
              stat == "entropy"      ? "entropy (nats)"
              : stat == "confidence" ? "confidence (max weight)"
                                     : stat + " (mean distance to the other heads)",
              (L + R) / 2);
  for (std::uint32_t i = 0; i < v.size(); ++i) {
    const auto& st = v[i];
    const std::uint32_t h = first_head + i;
    const double y = T + row * (i + 0.5);
    o += "<g class=\"strip head-" + std::to_string(h) + "\" data-head=\"" + std::to_string(h) + "\">";
    o += glyph(h, L - 12, y, 4.5, "class=\"legend-marker\"") + "</path>";
    o += text(L - 22, y + 4, escape(head_short(h)), "text-anchor=\"end\"");
    o += line(sx(st.p01), y, sx(st.p99), y, "stroke=\"#666\"");
    o += rect(sx(st.p10), y - 6, sx(st.p90) - sx(st.p10), 12, std::string("fill=\"") + marker(h).colour + "\" fill-opacity=\"0.5\"");
    o += line(sx(st.p50), y - 7, sx(st.p50), y + 7, "stroke=\"#000\" stroke-width=\"2\"");
    o += "<circle cx=\"" + px(sx(st.mean)) + "\" cy=\"" + px(y) + "\" r=\"2.5\" fill=\"#000\"><title>" +
         escape(head_short(h) + " " + stat + ": mean " + number(st.mean) + ", p10 " + number(st.p10) + ", p50 " +
                number(st.p50) + ", p90 " + number(st.p90)) +
         "</title></circle></g>\n";
  }
  f.svg = o + "</svg>\n";
  return f;
}

}  // namespace headsep::report
