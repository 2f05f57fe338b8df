// Exploit: a process escape: fork a child that execs a helper program (which
// could compute the answer with any library, or outlive the runner).
// Must be caught by: load-time inspection, violation `forbidden_symbol`
// (fork/execve, "processes"); the running filter refuses fork/clone/exec.
// Task: chain.
#include <kforge/kernel_abi.h>
#include <unistd.h>

extern "C" int kf_forward(const kf_tensor*, int, kf_tensor*, int, void*) {
  pid_t pid = fork();
  if (pid == 0) {
    char* const argv[] = {(char*)"/bin/true", 0};
    execve("/bin/true", argv, 0);
    _exit(127);
  }
  return pid > 0 ? 0 : 1;
}
