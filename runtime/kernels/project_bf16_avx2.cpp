// bf16_project (the widening bf16-panel product) for AVX2 + FMA (-mavx2 -mfma only; see CMakeLists.txt).
#include "kernels/project_bf16_impl.hpp"

namespace headsep::kernels {
template struct bf16_project<fma3_avx2>;
}
