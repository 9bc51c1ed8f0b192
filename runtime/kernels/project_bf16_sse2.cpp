// bf16_project (the widening bf16-panel product) for SSE2 (the x86-64 baseline: no extra flags).
#include "kernels/project_bf16_impl.hpp"

namespace headsep::kernels {
template struct bf16_project<xsimd::sse2>;
}
