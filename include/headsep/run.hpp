// headsep — running a report source through a weighting scheme and the metric kernels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "headsep/axes.hpp"
#include "headsep/batch.hpp"
#include "headsep/kernels.hpp"
#include "headsep/source.hpp"

namespace headsep {

enum class Precision : std::uint8_t { f64, f32 };

struct RunOptions {
  std::size_t chunk_reports = 8192;   ///< reports per batch (bounds memory together with threads)
  SimdLevel simd = SimdLevel::scalar;
  Precision precision = Precision::f64;
  unsigned threads = 0;               ///< 0 = all cores
};

/// One batch's results, handed to sinks in input order whatever the thread count.
struct BatchResult {
  const ReportBatch* batch = nullptr;
  std::vector<const std::string*> scenario_names;  ///< per slot
  std::vector<MetricBlock> metrics;                ///< per slot
};

class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void consume(const BatchResult& result) = 0;
};

/// What every output needs to know up front.
struct RunInfo {
  std::vector<std::string> axis_names;
  std::uint32_t heads = 0;
};

/// Streams `source` through `weighting` and the kernels, calling sink.consume per batch in order.
/// Throws Error on bad data (non-finite weights or results name the report and scenario).
void run(ReportSource& source, const Weighting& weighting, const AxisMap& axes, const RunOptions& options,
         ResultSink& sink);

}  // namespace headsep
