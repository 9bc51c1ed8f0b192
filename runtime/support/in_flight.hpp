// Which plugin call the current thread is inside: the host marks each call (InFlight), and the
// crash and exit handlers (io/output_file.cpp) read it to name the plugin in one line. Plain
// pointers to C strings that outlive the call, in initial-exec TLS: async-signal-safe to read.
#pragma once

namespace headsep::support {

struct InFlightCall {
  const char* who;   // the plugin's label ("weighting plugin 'x' (/path/x.so)") or its file
  const char* call;  // the function called, e.g. "weights()"
};

__attribute__((tls_model("initial-exec"))) inline thread_local const InFlightCall* t_in_flight = nullptr;

/// Marks a plugin call on this thread for its lifetime (nests: the previous mark comes back).
class InFlight {
 public:
  InFlight(const char* who, const char* call) noexcept : mine_{who, call}, saved_(t_in_flight) { t_in_flight = &mine_; }
  ~InFlight() { t_in_flight = saved_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  InFlightCall mine_;
  const InFlightCall* saved_;
};

}  // namespace headsep::support
