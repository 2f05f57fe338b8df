// Built without unwind tables (see CMakeLists.txt): a crash here is one the
// unwinder cannot step out of, like the crash in driver code seen on the H200.
extern "C" __attribute__((noinline)) int kforge_test_crash_here(volatile int* p) { return *p + 1; }
