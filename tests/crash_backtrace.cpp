// Linked into every test binary: a test process killed by SIGSEGV, SIGBUS,
// SIGILL or SIGFPE prints its backtrace before it dies, so that a crash seen
// once (a GPU machine without gdb, a CI run) says where it happened. Not under
// AddressSanitizer, whose own reports are better.
#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <initializer_list>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KFORGE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KFORGE_ASAN 1
#endif

#ifndef KFORGE_ASAN
namespace {

void write_text(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

// Only async-signal-safe calls; backtrace() is primed at install time, since
// its first call may allocate (it loads libgcc_s).
void on_fatal_signal(int sig) {
  write_text("\n*** test process killed by signal ");
  char number[8] = {};
  int n = sig, i = 6;
  do {
    number[i--] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0 && i >= 0);
  write_text(number + i + 1);
  write_text(" (");
  write_text(strsignal(sig));
  write_text("); backtrace:\n");
  void* frames[64];
  const int count = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, count, STDERR_FILENO);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

[[maybe_unused]] const bool installed = [] {
  void* prime[1];
  (void)::backtrace(prime, 1);
  // A stack overflow must still be able to run the handler.
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof(alt_stack);
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) ::sigaction(sig, &sa, nullptr);
  return true;
}();

}  // namespace
#endif  // KFORGE_ASAN
