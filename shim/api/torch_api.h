// The shim's entry point for the PyTorch bridge (libgpumemshim_torch.so). The bridge includes this
// header for the types and names but does not link the shim: it finds these functions with
// dlsym(RTLD_DEFAULT, ...) in a preloaded process. It is called from PyTorch's allocator trace
// tracker, under the allocator's lock, on the allocating thread, usually without the GIL: it takes
// no lock, allocates nothing, never calls into Python and never fails.
#pragma once
#include <cstdint>

#include "marker_api.h"

// action: a format::TorchAction value of the allocator (1 alloc, 2 free_requested,
// 3 free_completed, 4 segment_alloc, 5 segment_free, 6 segment_map, 7 segment_unmap, 8 oom:
// address = device free bytes). Other values are ignored. stream: the cudaStream_t as an integer.
GPUMEMSHIM_API void gpumemshim_torch_event(int action, int device, uint64_t address, uint64_t size,
                                           uint64_t stream);

// The same, for a block allocated while autograd runs a Node on this thread: grad_fn is the Node's
// C++ type name (typeid(*node).name(), a string that lives as long as the program). Under no
// Python, the block's stack is then that name instead of a walk of the native stack.
GPUMEMSHIM_API void gpumemshim_torch_event_grad_fn(int action, int device, uint64_t address,
                                                   uint64_t size, uint64_t stream, const char* grad_fn);

// The same, with the native stack walked whatever the thread runs (its Python frames, or the
// grad_fn's label when it runs none, recorded with it; grad_fn may be NULL). For the rare blocks
// whose native frames tell a library's own memory from the script's: the bridge asks it for blocks
// of the sizes PyTorch gives its cuBLAS/cuBLASLt workspaces, made by at::cuda's workspace getters.
GPUMEMSHIM_API void gpumemshim_torch_event_walk(int action, int device, uint64_t address,
                                                uint64_t size, uint64_t stream,
                                                const char* grad_fn);

// What the live tensor block at `address` (a storage's data pointer: the block the caching
// allocator handed out) is to training: category is a format::TensorCategory value (1 parameter,
// 2 gradient, 3 optimizer state, 4 activation saved for backward); other values are ignored. The
// Python package calls it (gpumemshim/_categories.py) with the GIL held; like the calls above it
// takes no lock, allocates nothing and records no stack. The tag holds until the block is freed.
GPUMEMSHIM_API void gpumemshim_tensor_tag(int device, uint64_t address, int category);

// The same for `count` tags at once: tags holds count triples (device, address, category), each
// checked as above. The Python package tells a backward pass's gradients in one call, since a call
// through ctypes costs more than the tag it records.
GPUMEMSHIM_API void gpumemshim_tensor_tags(const uint64_t* tags, uint64_t count);
