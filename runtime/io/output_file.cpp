// OutputFile: output files that appear only when complete (an unnamed O_TMPFILE file linked in at
// commit, or a named temporary renamed over the target), and the signal handler that removes
// unfinished temporaries. Below the engine: reports, scale-out and the CLI write through it too.
#include "headsep/output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <memory>

#include "headsep/error.hpp"
#include "support/in_flight.hpp"

namespace headsep {

// ---- temporaries a signal must not leave behind --------------------------------------------
// A fixed table of C strings the signal handler can read without locks or allocation: unlink()
// and write() are async-signal-safe, std::remove and iostreams are not.
namespace {
constexpr std::size_t kMaxTemporaries = 256;
std::atomic<char*> g_temporaries[kMaxTemporaries];

std::size_t register_temporary(const std::string& path) {
  char* copy = ::strdup(path.c_str());
  for (std::size_t i = 0; copy && i < kMaxTemporaries; ++i) {
    char* expected = nullptr;
    if (g_temporaries[i].compare_exchange_strong(expected, copy)) return i;
  }
  std::free(copy);
  return kMaxTemporaries;  // table full: still removed by the destructor, not by a signal
}
void forget_temporary(std::size_t slot) {
  if (slot < kMaxTemporaries) std::free(g_temporaries[slot].exchange(nullptr));
}

// Unnamed (O_TMPFILE) outputs not yet committed: exiting discards them, the handler says so.
std::atomic<int> g_anonymous{0};

// set_output_temporaries: read by each OutputFile as it opens.
std::atomic<Temporaries> g_temporaries_kind{Temporaries::unnamed};

// Removes every named temporary (unnamed ones vanish with the process); true if there were any.
bool remove_temporaries() noexcept {
  int removed = g_anonymous.load() > 0;
  for (auto& t : g_temporaries)
    if (char* p = t.exchange(nullptr)) removed += ::unlink(p) == 0;
  return removed;
}

// One line on stderr from pieces, without allocation (signal handlers, exit handlers).
void say(std::initializer_list<const char*> parts) noexcept {
  char line[1024];
  std::size_t n = 0;
  for (const char* part : parts)
    for (const char* c = part; c && *c && n < sizeof line - 2; ++c) line[n++] = *c == '\n' || *c == '\x1b' ? ' ' : *c;
  line[n++] = '\n';
  [[maybe_unused]] auto w = ::write(STDERR_FILENO, line, n);
}

const char* signal_name(int sig) noexcept {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "a fatal signal";
  }
}

// A crash: not containable in-process (docs/PLUGINS.md, "Isolation"), but named: the plugin call
// this thread was in, if any. Then the default action (core dump, exit status 128 + signal).
void on_crash(int sig) {
  const bool removed = remove_temporaries();
  const support::InFlightCall* f = support::t_in_flight;
  if (f)
    say({"headsep: fatal: ", signal_name(sig), " in ", f->who, ", during its ", f->call,
         " (a plugin runs inside headsep's process: its crash ends the run", removed ? "; removed unfinished output)" : ")"});
  else
    say({"headsep: fatal: ", signal_name(sig), " (no plugin call was in progress on the crashing thread)",
         removed ? "; removed unfinished output" : ""});
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// exit() called by a plugin (any thread): the run did not finish, whatever status it asked for.
// Ends at once, before static destructors (oneTBB's finalizer crashed when a worker called exit).
void on_exit_call() {
  const support::InFlightCall* f = support::t_in_flight;
  if (!f) return;
  const bool removed = remove_temporaries();
  say({"headsep: error: ", f->who, " called exit() during its ", f->call, removed ? "; removed unfinished output" : ""});
  ::_exit(1);
}

void on_signal(int sig) {
  const int removed = remove_temporaries();
  if (sig != SIGPIPE) {  // a closed stdout (| head) ends quietly
    const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
    char line[128] = "headsep: interrupted by ";
    std::size_t n = std::strlen(line);
    for (const char* c = name; *c; ++c) line[n++] = *c;
    const char* tail = removed ? "; removed unfinished output\n" : "\n";
    for (const char* c = tail; *c; ++c) line[n++] = *c;
    [[maybe_unused]] auto w = ::write(STDERR_FILENO, line, n);
  }
  ::_exit(128 + sig);
}
}  // namespace

void set_output_temporaries(Temporaries how) noexcept { g_temporaries_kind.store(how, std::memory_order_relaxed); }

Temporaries parse_temporaries(std::string_view name) {
  if (name == "unnamed") return Temporaries::unnamed;
  if (name == "named") return Temporaries::named;
  throw UsageError("--temporaries: expected unnamed or named, got '" + std::string(name) + "'");
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = &on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::sigaction(sig, &sa, nullptr);
  struct sigaction crash {};
  crash.sa_handler = &on_crash;
  crash.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigemptyset(&crash.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) ::sigaction(sig, &crash, nullptr);
  std::atexit(&on_exit_call);
}

// ---- standard output, kept from plugins -----------------------------------------------------
namespace {
std::FILE* g_data_stdout = nullptr;  // protect_stdout(): headsep's own copy of descriptor 1
CommitGroup* g_group = nullptr;      // the CommitGroup alive, if any (main thread)
}  // namespace

std::FILE* data_stdout() noexcept { return g_data_stdout ? g_data_stdout : stdout; }

void protect_stdout() noexcept {
  if (g_data_stdout) return;
  std::fflush(stdout);
  const int fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return;  // no standard output to protect
  std::FILE* f = ::fdopen(fd, "w");
  if (!f || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    if (f) std::fclose(f);
    else ::close(fd);
    return;
  }
  g_data_stdout = f;
}

// ---- OutputFile ------------------------------------------------------------------------------

OutputFile::OutputFile(const std::string& path) : path_(path) {
  // Standard output by any name: headsep's copy of it (descriptor 1 itself may be stderr now).
  if (path.empty() || path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1") {
    file_ = data_stdout();
    return;
  }
  // Devices and pipes (/dev/null, /dev/stdout, a FIFO) are written in place: renaming a
  // temporary over them would replace the device with a regular file.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) throw Error(path + ": cannot open output: " + std::strerror(errno));
    direct_ = true;
    return;
  }
  // First choice: an unnamed file in the target folder (O_TMPFILE), linked in at commit. It has
  // no name until then, so nothing can be left behind, not even by SIGKILL (mpirun kills the
  // ranks of a failed job 1 s after SIGTERM; a loaded machine may not run the handler in time).
  // Where the file system or kernel lacks O_TMPFILE (or /proc is missing for the link), a named
  // temporary that the signal handler and the destructor remove (Temporaries::named, --temporaries
  // named, forces it: tests cover both).
  int fd = -1;
#ifdef O_TMPFILE
  const bool unnamed = g_temporaries_kind.load(std::memory_order_relaxed) == Temporaries::unnamed;
  if (unnamed && ::access("/proc/self/fd", X_OK) == 0) {
    const auto parent = std::filesystem::path(path).parent_path();
    fd = ::open(parent.empty() ? "." : parent.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT)
      throw Error(path + ": cannot create output: " + std::strerror(errno));
    anonymous_ = fd >= 0;
    if (anonymous_) ++g_anonymous;
  }
#endif
  if (fd < 0) {
    tmp_ = path + ".tmp-XXXXXX";
    fd = ::mkstemp(tmp_.data());
    if (fd < 0) throw Error(path + ": cannot create output: " + std::strerror(errno));
    slot_ = register_temporary(tmp_);
  }
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    const int err = errno;
    ::close(fd);
    if (!anonymous_) {
      forget_temporary(slot_);
      std::remove(tmp_.c_str());
    } else {
      --g_anonymous;
      anonymous_ = false;
    }
    throw Error(path + ": cannot open output: " + std::strerror(err));
  }
}

OutputFile::~OutputFile() {
  if (file_ && file_ != data_stdout()) {
    std::fclose(file_);
    if (!committed_ && !direct_ && !anonymous_) std::remove(tmp_.c_str());
  }
  if (anonymous_ && !committed_) --g_anonymous;
  forget_temporary(slot_);
}

void OutputFile::write(std::string_view bytes) {
  if (bytes.empty()) return;
  if (capture_) return (void)capture_->append(bytes);
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    throw Error((path_.empty() ? std::string("<stdout>") : path_) + ": write failed: " + std::strerror(errno));
}

std::uint64_t OutputFile::position() {
  const off_t at = file_ && file_ != data_stdout() ? ::ftello(file_) : -1;
  if (at < 0) throw Error(path_ + ": cannot tell the write position: " + std::strerror(errno));
  return static_cast<std::uint64_t>(at);
}

void OutputFile::skip(std::uint64_t bytes) {
  if (!file_ || file_ == data_stdout() || ::fseeko(file_, static_cast<off_t>(bytes), SEEK_CUR) != 0)
    throw Error(path_ + ": cannot seek: " + std::strerror(errno));
}

std::string OutputFile::shared_path() const {
  if (!file_ || file_ == data_stdout() || direct_) return {};
  if (anonymous_) return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(::fileno(file_));
  return tmp_;
}

void OutputFile::commit() {
  if (capture_) return;
  if (std::fflush(file_) != 0) throw Error(path_ + ": write failed: " + std::strerror(errno));
  if (file_ == data_stdout()) return;
  if (direct_) {
    std::fclose(file_);
    file_ = nullptr;
    committed_ = true;
    return;
  }
  // mkstemp and O_TMPFILE create 0600; give the file the usual permissions.
  ::fchmod(::fileno(file_), 0644);
  if (g_group) return g_group->adopt(*this);  // named with the run's other outputs
  finish_commit();
}

void OutputFile::finish_commit() {
  if (anonymous_) return link_anonymous();
  if (std::fclose(file_) != 0) {
    file_ = nullptr;
    std::remove(tmp_.c_str());
    throw Error(path_ + ": write failed: " + std::strerror(errno));
  }
  file_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    throw Error(path_ + ": cannot rename output into place: " + std::strerror(errno));
  }
  forget_temporary(slot_);  // renamed: a later signal must not touch the name
  committed_ = true;
}

// Gives the unnamed file its name. linkat never replaces a file, so: linked straight to PATH when
// PATH does not exist (atomic: complete or absent); else linked to a fresh temporary name that is
// renamed over PATH (atomic replace). That name exists only between the two calls and is in the
// signal handler's table meanwhile. linkat through /proc/self/fd needs no privilege
// (AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH).
void OutputFile::link_anonymous() {
  const std::string self = "/proc/self/fd/" + std::to_string(::fileno(file_));
  auto fail = [&](const char* what) {
    const int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    throw Error(path_ + ": " + what + ": " + std::strerror(err));
  };
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
    if (errno != EEXIST) fail("cannot link output into place");
    for (int attempt = 0;; ++attempt) {
      tmp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(attempt);
      slot_ = register_temporary(tmp_);
      if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp_.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
      forget_temporary(slot_);
      slot_ = std::size_t(-1);
      if (errno != EEXIST || attempt == 100) fail("cannot link output into place");
    }
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      std::remove(tmp_.c_str());
      errno = err;
      fail("cannot rename output into place");
    }
    forget_temporary(slot_);
  }
  // Linked: the data are in the file whatever close() says (it was flushed above).
  std::fclose(file_);
  file_ = nullptr;
  committed_ = true;
  --g_anonymous;
}

// ---- CommitGroup ----------------------------------------------------------------------------

CommitGroup::CommitGroup() : previous_(g_group) { g_group = this; }

CommitGroup::~CommitGroup() {
  g_group = previous_;
  pending_.clear();  // each unfinished file removed by its destructor
}

// Takes over `file`'s unfinished file (flushed): `file` is left committed and empty.
void CommitGroup::adopt(OutputFile& file) {
  auto kept = std::unique_ptr<OutputFile>(new OutputFile(OutputFile::Adopted{}));
  kept->path_ = file.path_, kept->tmp_ = std::move(file.tmp_), kept->file_ = file.file_;
  kept->anonymous_ = file.anonymous_, kept->slot_ = file.slot_;
  file.file_ = nullptr, file.anonymous_ = false, file.slot_ = std::size_t(-1), file.committed_ = true;
  pending_.push_back(std::move(kept));
}

void CommitGroup::commit() {
  for (auto& f : pending_) f->finish_commit();
  pending_.clear();
}

// ---- outputs checked before a run -------------------------------------------------------------

namespace {
// One file whatever the path says: the folder resolved through links (weakly_canonical), and
// for an existing file its device and inode (hard links).
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ea), ea), cb = fs::weakly_canonical(fs::absolute(b, eb), eb);
  if (!ea && !eb && ca == cb) return true;
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
}  // namespace

void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i)
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      const auto &[oa, pa] = outputs[i];
      const auto &[ob, pb] = outputs[j];
      if (pa.empty() || pb.empty() || pa == "-" || pb == "-" || !same_file(pa, pb)) continue;
      throw UsageError(oa + " " + pa + " and " + ob + " " + pb + " are the same file (one output would overwrite the other)");
    }
  for (const auto& [option, path] : outputs) {
    if (path.empty() || path == "-") continue;
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
      if (std::filesystem::is_directory(st)) throw Error(option + " " + path + ": is a folder, not a file");
      continue;  // a device or pipe, written in place
    }
    try {
      OutputFile probe(path);  // created and removed: nothing is left
    } catch (const Error& e) {
      throw Error(option + " " + e.what());
    }
  }
}

}  // namespace headsep
