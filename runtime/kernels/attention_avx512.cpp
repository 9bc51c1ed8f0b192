// attention_kernel for AVX-512 F/CD/DQ/BW + FMA (compiled with those flags only; see CMakeLists.txt).
#include "kernels/attention_simd_impl.hpp"

namespace headsep::kernels {
template struct attention_kernel<xsimd::avx512bw>;
}
