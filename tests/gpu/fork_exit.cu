// H200 scenario: a process forks before touching CUDA; the child allocates (and keeps) 8 MiB and
// ends without exit(): through _exit, _Exit or quick_exit as argv[1] says, or "sleep": it waits to
// be killed. The parent then allocates and frees 1 MiB and exits normally.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

static void* child_buffer() {
  void* p = nullptr;
  cudaMalloc(&p, 8u << 20);  // site: child
  return p;
}

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "_exit";
  pid_t pid = fork();
  if (pid == 0) {
    void* p = child_buffer();
    cudaMemset(p, 0, 8u << 20);
    cudaDeviceSynchronize();
    if (std::strcmp(how, "sleep") == 0) {
      std::printf("ready\n");
      std::fflush(stdout);
      sleep(120);
    }
    if (std::strcmp(how, "_Exit") == 0) _Exit(3);
    if (std::strcmp(how, "quick_exit") == 0) std::quick_exit(3);
    _exit(3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  void* q = nullptr;
  cudaMalloc(&q, 1u << 20);
  cudaFree(q);
  std::printf("child=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  return 0;
}
