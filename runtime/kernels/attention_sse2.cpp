// attention_kernel for SSE2 (the x86-64 baseline: no extra flags).
#include "kernels/attention_simd_impl.hpp"

namespace headsep::kernels {
template struct attention_kernel<xsimd::sse2>;
}
