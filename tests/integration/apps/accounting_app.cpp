// Device memory held still long enough for the shim's NVML sampler to see it, for the accounting
// tests (test_accounting.py). Usage: accounting_app END [DEVICE] [HOLD_MS]
//   END: exit (return from main), _exit, fork (a child allocates, holds and exits; the parent
//   waits), fork-first (the child is forked before the parent used CUDA), host-only (pinned host
//   memory only: no device memory, so no NVML).
// Allocates 4 x 64 MiB on DEVICE, holds HOLD_MS, frees two, holds again, frees one more (exit and
// _exit: right before the end, so that only a sample taken at exit can see it), then ends as told.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "check_cuda.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

void hold(int ms) {
  usleep(static_cast<useconds_t>(ms) * 1000);
}

void* work(int device, int hold_ms) {
  check(cudaSetDevice(device), "cudaSetDevice");
  void* p[4] = {};
  for (void*& x : p) check(cudaMalloc(&x, 64 * kMiB), "cudaMalloc");
  hold(hold_ms);
  check(cudaFree(p[0]), "cudaFree");
  check(cudaFree(p[1]), "cudaFree");
  hold(hold_ms);
  return p[2];
}

int child(int device, int hold_ms) {
  check(cudaSetDevice(device), "cudaSetDevice");
  void* p = nullptr;
  check(cudaMalloc(&p, 32 * kMiB), "cudaMalloc");
  hold(hold_ms);
  std::printf("child done\n");
  std::fflush(stdout);
  return 0;
}

int wait_for(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 5;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string end = argc > 1 ? argv[1] : "exit";
  const int device = argc > 2 ? std::atoi(argv[2]) : 0;
  const int hold_ms = argc > 3 ? std::atoi(argv[3]) : 250;
  if (end == "host-only") {
    void* p = nullptr;
    check(cudaMallocHost(&p, 64 * kMiB), "cudaMallocHost");
    hold(hold_ms);
    check(cudaFreeHost(p), "cudaFreeHost");
    std::printf("done\n");
    return 0;
  }
  if (end == "fork-first") {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) std::exit(child(device, hold_ms));
    const int rc = wait_for(pid);
    work(device, hold_ms);
    std::printf("parent done\n");
    return rc;
  }
  void* last = work(device, hold_ms);
  if (end == "fork") {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) std::exit(child(device, hold_ms));
    const int rc = wait_for(pid);
    std::printf("parent done\n");
    return rc;
  }
  std::printf("done\n");
  std::fflush(stdout);
  check(cudaFree(last), "cudaFree");
  if (end == "_exit") _exit(0);
  return 0;
}
