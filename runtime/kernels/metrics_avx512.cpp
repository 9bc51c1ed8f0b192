// metrics_kernel for AVX-512 F/CD/DQ/BW + FMA (compiled with those flags only; see CMakeLists.txt).
#include "kernels/metrics_simd_impl.hpp"

namespace headsep::kernels {
template struct metrics_kernel<xsimd::avx512bw>;
}
