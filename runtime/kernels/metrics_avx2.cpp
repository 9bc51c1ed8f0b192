// metrics_kernel for AVX2 + FMA (compiled with -mavx2 -mfma only; see CMakeLists.txt).
#include "kernels/metrics_simd_impl.hpp"

namespace headsep::kernels {
template struct metrics_kernel<fma3_avx2>;
}
