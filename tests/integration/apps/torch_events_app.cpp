// Plays PyTorch's caching allocator against the shim's C API for the torch bridge: finds
// gpumemshim_torch_event with dlsym(RTLD_DEFAULT) like libgpumemshim_torch.so does, and reports
// the events of a small "step": one segment, blocks handed out and freed, one kept, an OOM.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>

using TorchEventFn = void (*)(int action, int device, uint64_t address, uint64_t size,
                              uint64_t stream);

namespace {
constexpr uint64_t kSegment = 0x7f0000000000ull;
constexpr uint64_t kStream = 0x1234;

__attribute__((noinline)) void keep_block(TorchEventFn fn) {
  fn(1, 0, kSegment + 0x200000, 4096, kStream);  // site: kept_block
}
}  // namespace

int main() {
  auto fn = reinterpret_cast<TorchEventFn>(dlsym(RTLD_DEFAULT, "gpumemshim_torch_event"));
  if (!fn) {
    std::puts("no shim");
    return 3;
  }
  fn(4, 0, kSegment, 20u << 20, kStream);  // segment_alloc
  for (int i = 0; i < 3; ++i) {
    uint64_t block = kSegment + static_cast<uint64_t>(i) * 0x100000;
    fn(1, 0, block, 512, kStream);  // alloc
    fn(2, 0, block, 512, kStream);  // free_requested
    fn(3, 0, block, 512, kStream);  // free_completed
  }
  keep_block(fn);
  fn(0, 0, kSegment, 0, kStream);  // actions outside 1..8 are ignored by the shim
  fn(99, 0, kSegment, 0, kStream);
  fn(8, 0, 1000, 1ull << 40, kStream);   // oom: 1000 bytes free, 1 TiB asked
  std::puts("ok");
  return 0;
}
