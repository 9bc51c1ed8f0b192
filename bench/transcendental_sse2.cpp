// bench_transcendental's sse2 loops (compiled with sse2's flags only: bench/CMakeLists.txt).
#include "transcendental_arch.hpp"

namespace headsep::bench_transcendental {
HEADSEP_TRANSCENDENTAL_FNS(sse2_fns, xsimd::sse2)
}
