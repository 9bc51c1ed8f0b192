// bench_transcendental's avx2 loops (compiled with avx2's flags only: bench/CMakeLists.txt).
#include "transcendental_arch.hpp"

namespace headsep::bench_transcendental {
HEADSEP_TRANSCENDENTAL_FNS(avx2_fns, kernels::fma3_avx2)
}
