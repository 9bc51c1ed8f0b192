// bf16_project (the widening bf16-panel product) for AVX-512 F/CD/DQ/BW + FMA (those flags only; see CMakeLists.txt).
#include "kernels/project_bf16_impl.hpp"

namespace headsep::kernels {
template struct bf16_project<xsimd::avx512bw>;
}
