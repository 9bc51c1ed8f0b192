// metrics_kernel for SSE2 (the x86-64 baseline: no extra flags).
#include "kernels/metrics_simd_impl.hpp"

namespace headsep::kernels {
template struct metrics_kernel<xsimd::sse2>;
}
