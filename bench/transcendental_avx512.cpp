// bench_transcendental's avx512 loops (compiled with avx512's flags only: bench/CMakeLists.txt).
#include "transcendental_arch.hpp"

namespace headsep::bench_transcendental {
HEADSEP_TRANSCENDENTAL_FNS(avx512_fns, xsimd::avx512bw)
}
