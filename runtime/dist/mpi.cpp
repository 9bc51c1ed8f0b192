// headsep — MPI start-up, failure handling and point-to-point messages (runtime/dist/comm.hpp).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "dist/comm.hpp"
#include "dist/dist.hpp"

namespace headsep::dist {
namespace {

bool g_active = false;
int g_rank = 0, g_size = 1, g_local = 1;
std::string g_host;

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

// Waiting on MPI by polling MPI_Test with growing sleeps: Open MPI's blocking calls spin a core
// at 100 %, which a rank waiting for results would take from the threads computing them.
class Backoff {
 public:
  void pause() {
    if (step_ < 4) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(500, 10 << std::min(step_ - 4, 6))));
    }
    ++step_;
  }

 private:
  int step_ = 0;
};

// Pieces of at most 1 GiB: MPI counts are int.
constexpr std::size_t kPiece = std::size_t(1) << 30;

}  // namespace

void init(int* argc, char*** argv) {
  if (const char* force = std::getenv("HEADSEP_MPI"); force && std::strcmp(force, "0") == 0) return;
  const bool launched = env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") || env_set("PMI_RANK") ||
                        env_set("PMI_SIZE") || (std::getenv("HEADSEP_MPI") && std::strcmp(std::getenv("HEADSEP_MPI"), "1") == 0);
  if (!launched) return;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "headsep: error: MPI_Init_thread failed\n");
    std::exit(1);
  }
  g_active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  // The sinks' serial stage and a worker's input stage call MPI from different threads at once.
  if (provided < MPI_THREAD_MULTIPLE && g_size > 1) {
    if (g_rank == 0)
      std::fprintf(stderr, "headsep: error: this MPI library does not provide MPI_THREAD_MULTIPLE (got level %d)\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &g_local);
  MPI_Comm_free(&local);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  g_host.assign(host, static_cast<std::size_t>(std::max(0, len)));
}

void finalize() {
  if (!g_active) return;
  g_active = false;
  MPI_Finalize();
}

bool compiled() noexcept { return true; }
bool active() noexcept { return g_active; }
int rank() noexcept { return g_rank; }
int size() noexcept { return g_size; }
int local_size() noexcept { return g_local; }

std::string library() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<std::size_t>(std::max(0, len)));
  if (auto nl = s.find_first_of(",\n"); nl != std::string::npos) s.resize(nl);
  return s;
}

std::string where() {
  if (g_size <= 1) return {};
  return "rank " + std::to_string(g_rank) + " (" + g_host + "): ";
}

void fail(const std::string& what, int exit_code) {
  if (!g_active || g_size <= 1) return;
  if (g_rank == 0) {
    // The caller printed the message and removed its temporaries; stop every rank.
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }
  // Rank 0 prints it, cleans up and aborts the job (it watches for errors whenever it waits).
  try {
    detail::send(0, detail::kError, [&] {
      detail::Out o;
      o.str(what);
      return o.take();
    }());
  } catch (...) {
  }
  // Waiting to be stopped; should rank 0 never act (it cannot: it waits for this rank's end
  // mark), give up after two minutes rather than hang a job.
  for (int i = 0; i < 1200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

void print_stats(const Options& options) {
  if (!options.stats || !g_active) return;
  auto& c = detail::counters();
  std::fprintf(stderr,
               "headsep: mpi: rank %d of %d sent %llu bytes in %llu messages (results %llu B, batches %llu B, "
               "errors %llu B, row offsets %llu B)\n",
               g_rank, g_size,
               static_cast<unsigned long long>(c.bytes[detail::kResult] + c.bytes[detail::kBatch] + c.bytes[detail::kError] +
                                               c.bytes[detail::kOffset]),
               static_cast<unsigned long long>(c.messages[detail::kResult] + c.messages[detail::kBatch] +
                                               c.messages[detail::kError] + c.messages[detail::kOffset]),
               static_cast<unsigned long long>(c.bytes[detail::kResult].load()),
               static_cast<unsigned long long>(c.bytes[detail::kBatch].load()),
               static_cast<unsigned long long>(c.bytes[detail::kError].load()),
               static_cast<unsigned long long>(c.bytes[detail::kOffset].load()));
}

namespace detail {

Counters& counters() {
  static Counters c;
  return c;
}

std::string Out::take() {
  const std::uint64_t n = buf_.size() - 8;
  std::memcpy(buf_.data(), &n, 8);
  return std::move(buf_);
}

In::In(const std::string& buf, int from) : buf_(buf), from_(from) {
  if (buf.size() < 8) corrupt("shorter than its header");
}
void In::corrupt(const char* what) const {
  throw Error("message from rank " + std::to_string(from_) + " is corrupt (" + what +
              "); are all ranks running the same headsep build?");
}
void In::read(void* p, std::size_t n) {
  if (n > buf_.size() - pos_) corrupt("truncated");
  if (n) std::memcpy(p, buf_.data() + pos_, n);
  pos_ += n;
}
std::uint64_t In::u64() {
  std::uint64_t v = 0;
  read(&v, sizeof v);
  return v;
}
std::uint64_t In::count(std::size_t elem) {
  const std::uint64_t n = u64();
  if (n > (buf_.size() - pos_) / elem) corrupt("a length beyond the message");
  return n;
}
std::string In::str() {
  const std::uint64_t n = count(1);
  std::string s(buf_.data() + pos_, n);
  pos_ += n;
  return s;
}
void In::strs(std::vector<std::string>& v) {
  const std::uint64_t n = count(8);
  v.clear();
  v.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) v.push_back(str());
}
void In::done() const {
  if (pos_ != buf_.size()) corrupt("trailing bytes");
}

std::unique_ptr<Pending> isend(int dest, int tag, std::string bytes) {
  auto p = std::make_unique<Pending>();
  p->bytes = std::move(bytes);
  counters().bytes[tag] += p->bytes.size();
  counters().messages[tag] += 1;
  for (std::size_t off = 0; off < p->bytes.size() || off == 0; off += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, p->bytes.size() - off));
    MPI_Request r;
    MPI_Isend(p->bytes.data() + off, n, MPI_BYTE, dest, tag, MPI_COMM_WORLD, &r);
    p->requests.push_back(r);
    if (p->bytes.size() <= kPiece) break;
  }
  return p;
}

bool test(Pending& p) {
  int done = 0;
  MPI_Testall(static_cast<int>(p.requests.size()), p.requests.data(), &done, MPI_STATUSES_IGNORE);
  return done != 0;
}

void wait(Pending& p) {
  Backoff b;
  while (!test(p)) b.pause();
}

void send(int dest, int tag, std::string bytes) {
  auto p = isend(dest, tag, std::move(bytes));
  wait(*p);
}

void park(std::unique_ptr<Pending> p) {
  static std::mutex m;
  static std::vector<std::unique_ptr<Pending>> parked;
  std::lock_guard lock(m);
  parked.push_back(std::move(p));
}

namespace {
std::string receive_from(int source, int tag, MPI_Status& st) {
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  std::string first(static_cast<std::size_t>(n), '\0');
  MPI_Recv(first.data(), n, MPI_BYTE, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (first.size() < 8) return first;  // In() names it corrupt
  std::uint64_t len = 0;
  std::memcpy(&len, first.data(), 8);
  const std::uint64_t total = len + 8;
  if (total <= first.size()) return first;
  std::string all = std::move(first);
  std::size_t off = all.size();
  all.resize(total);
  while (off < total) {
    const int m = static_cast<int>(std::min<std::uint64_t>(kPiece, total - off));
    MPI_Recv(all.data() + off, m, MPI_BYTE, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    off += std::size_t(m);
  }
  return all;
}
}  // namespace

std::string recv(int source, int tag, bool watch_errors) {
  Backoff b;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (watch_errors) {
      MPI_Iprobe(MPI_ANY_SOURCE, kError, MPI_COMM_WORLD, &flag, &st);
      if (flag) {
        const int from = st.MPI_SOURCE;
        std::string msg = receive_from(from, kError, st);
        In in(msg, from);
        throw RemoteError(in.str());
      }
    }
    MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &st);
    if (flag) return receive_from(source, tag, st);
    b.pause();
  }
}

}  // namespace detail
}  // namespace headsep::dist
