#include "tools/tandem/stop_signal.h"

#include <csignal>

namespace tandem::tools {
namespace {

// A signal handler may only touch lock-free atomics; these are process-wide by nature.
std::atomic<int> g_signal{0};
struct sigaction g_previous_int, g_previous_term;

void onStopSignal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);  // the first signal is the one reported
}

}  // namespace

StopSignals::StopSignals() {
  g_signal.store(0);
  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

bool StopSignals::requested() const { return g_signal.load() != 0; }
int StopSignals::signal() const { return g_signal.load(); }
int StopSignals::pending() { return g_signal.load(); }

std::string StopSignals::nameOf(int signal) {
  switch (signal) {
    case SIGINT:
      return "Ctrl-C (SIGINT)";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal " + std::to_string(signal);
  }
}

}  // namespace tandem::tools
