#pragma once

#include <exception>
#include <string>

// What the command is doing now ("reading the training data", "training, epoch 3"), for
// the one line that an unexpected failure prints (main.cc: an exception nobody caught, on
// any thread, or a crash): the failure then names what failed even where no Status could
// carry it.

namespace tandem::tools {

/// Sets the activity; later failures say "... while WHAT".
void setActivity(const std::string& what);
/// The activity as last set ("" before any).
std::string activity();
/// The same for a signal handler: a pointer to a buffer that is always NUL-terminated
/// (a racing setActivity may garble it, never overrun it).
const char* activityForSignalHandler();

/// Installs the handlers that turn an uncaught exception (std::terminate, on any thread)
/// and a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) into one line on standard error naming
/// the failure and the activity; an exception then exits kExitResources, a crash is
/// re-raised (so the shell sees the signal, 128 + it).
void installFailureHandlers();

/// The line for an exception caught by main (or the terminate handler): "out of memory
/// (std::bad_alloc) while ..." and the like, without "tandem: ".
std::string describeException(std::exception_ptr e);

}  // namespace tandem::tools
