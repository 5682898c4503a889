#include "tools/tandem/activity.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <exception>
#include <ios>
#include <mutex>
#include <new>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "backend/processes.h"
#include "tools/tandem/commands.h"

namespace tandem::tools {
namespace {

std::mutex g_mu;
// A fixed buffer rather than a std::string, so that a signal handler can read it.
char g_activity[256] = "";

void writeLine(const std::string& text) {
  const std::string line =
      absl::StrCat("tandem: ", backend::Processes::current().prefix(), text, "\n");
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

[[noreturn]] void onTerminate() {
  writeLine(describeException(std::current_exception()));
  std::_Exit(kExitResources);
}

const char* signalName(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV (an invalid memory access)";
    case SIGBUS:
      return "SIGBUS (a bus error: a file mapped in memory shrank?)";
    case SIGFPE:
      return "SIGFPE (an arithmetic fault)";
    case SIGILL:
      return "SIGILL (an instruction this CPU lacks)";
    case SIGABRT:
      return "SIGABRT (an internal check failed, or the heap is corrupt)";
    default:
      return "a fatal signal";
  }
}

// Async-signal-safe: write(2) of fixed pieces, then the default action (the shell sees
// the signal as before).
void onCrash(int sig) {
  const char* parts[] = {
      "tandem: crashed with ", signalName(sig), " while ",
      activityForSignalHandler()[0] != '\0' ? activityForSignalHandler() : "starting",
      ": a bug in tandem; please report it with the command line\n"};
  for (const char* p : parts) (void)!::write(STDERR_FILENO, p, std::strlen(p));
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void setActivity(const std::string& what) {
  std::lock_guard<std::mutex> l(g_mu);
  const size_t n = std::min(what.size(), sizeof g_activity - 1);
  std::memcpy(g_activity, what.data(), n);
  g_activity[n] = '\0';
}

std::string activity() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_activity;
}

const char* activityForSignalHandler() { return g_activity; }

std::string describeException(std::exception_ptr e) {
  std::string what = "stopped by an unexpected failure";
  try {
    if (e) std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    what = "out of memory (std::bad_alloc)";
  } catch (const std::ios_base::failure& f) {
    what = absl::StrCat("an input/output error: ", f.what(), " (std::ios_base::failure)");
  } catch (const std::system_error& f) {
    // What std::thread throws when the system cannot give a thread (EAGAIN: a process or
    // memory limit such as ulimit -u or -v).
    what = absl::StrCat("the system refused a resource: ", f.what(), " (std::system_error, ",
                        f.code().category().name(), " ", f.code().value(), ")");
  } catch (const std::exception& f) {
    what = absl::StrCat("an unexpected error: ", f.what());
  } catch (...) {
    what = "an unexpected exception of unknown type";
  }
  const std::string doing = activity();
  return absl::StrCat(what, doing.empty() ? "" : absl::StrCat(" while ", doing));
}

void installFailureHandlers() {
  std::set_terminate(onTerminate);
  struct sigaction action {};
  action.sa_handler = onCrash;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &action, nullptr);
}

}  // namespace tandem::tools
