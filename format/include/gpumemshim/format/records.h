// The records of the gpumemshim trace format (docs/trace-format.md). Plain data shared by the
// encoder (used inside the shim's hot path) and the trace reader (trace_reader.h).
#pragma once
#include <cstdint>
#include <string_view>

namespace gpumemshim::format {

inline constexpr char kMagic[8] = {'G', 'M', 'S', 'T', 'R', 'A', 'C', 'E'};
// The version this gpumemshim writes. 1.1: Flush records. 2.0: the hot records (Alloc, Free,
// TorchEvent) have fixed little-endian payloads (fixed_layout.h) instead of varints. 3.0: the 2.0
// records in checksummed, optionally zstd-compressed blocks after a 32-byte header (block.h). 3.1:
// adds the ProcessMemory record, which 3.0 readers skip. 3.2: exact flush marks (every record
// after a mark was made at or after its time; docs/trace-format.md "Ordering"), records unchanged.
// 3.3: blocks compressed with LZ4 (codec 2) instead of zstd, records unchanged.
// Readers read 1.x, 2.x and 3.x.
inline constexpr uint16_t kVersionMajor = 3;
inline constexpr uint16_t kVersionMinor = 3;
inline constexpr size_t kHeaderSize = 16;  // formats 1 and 2; format 3's is kHeaderSizeV3 (block.h)

struct Version {
  uint16_t major = 0;
  uint16_t minor = 0;
};
inline constexpr Version kVersion{kVersionMajor, kVersionMinor};
inline constexpr Version kVersion1_1{1, 1};  // the last varint-only version (encode_v1)
inline constexpr Version kVersion2_0{2, 0};  // the last version of records without blocks
// Whether a file of version `v` holds its records in blocks (block.h).
inline constexpr bool has_blocks(Version v) { return v.major >= 3; }
// Whether a file of version `v` was written with zstd blocks (3.0-3.2), which decode about as fast
// as the analysis consumes their events, where LZ4's (3.3 on) decode several times faster.
inline constexpr bool has_zstd_blocks(Version v) { return v.major == 3 && v.minor < 3; }
// Whether a file of version `v` has exact flush marks (its readers may replay up to the last one).
inline constexpr bool has_exact_marks(Version v) { return v.major > 3 || (v.major == 3 && v.minor >= 2); }
// Whether a file of version `v` has the fixed-layout hot records.
inline constexpr bool has_fixed_layout(Version v) { return v.major >= 2; }

enum class RecordType : uint8_t {
  kProcess = 1,
  kModule = 2,
  kStack = 3,
  kAlloc = 4,
  kFree = 5,
  kAllocFailed = 6,
  kMemInfo = 7,
  kMarker = 8,
  kDevice = 9,
  kAttribute = 10,
  kEnd = 11,
  kPyCode = 12,
  kPyStack = 13,
  kTorchEvent = 14,
  kStackLabel = 15,
  kFlush = 16,
  kProcessMemory = 17,  // since 3.1
};

// Which API call made the event. Values are part of the format: append only.
enum class Api : uint8_t {
  kUnknown = 0,
  kCudaMalloc = 1,
  kCudaFree = 2,
  kCudaMallocAsync = 3,
  kCudaFreeAsync = 4,
  kCudaMallocFromPoolAsync = 5,
  kCudaMallocManaged = 6,
  kCudaMallocPitch = 7,
  kCudaMalloc3D = 8,
  kCudaMallocHost = 9,
  kCudaHostAlloc = 10,
  kCudaFreeHost = 11,
  kCudaMemGetInfo = 12,
  kCuMemAlloc = 13,
  kCuMemFree = 14,
  kCuMemAllocPitch = 15,
  kCuMemAllocManaged = 16,
  kCuMemAllocAsync = 17,
  kCuMemFreeAsync = 18,
  kCuMemAllocFromPoolAsync = 19,
  kCuMemCreate = 20,
  kCuMemRelease = 21,
  kCuMemMap = 22,
  kCuMemUnmap = 23,
  kCuMemAddressReserve = 24,
  kCuMemAddressFree = 25,
  kCuMemHostAlloc = 26,
  kCuMemAllocHost = 27,
  kCuMemFreeHost = 28,
  kCuMemGetInfo = 29,
};
inline constexpr uint8_t kApiCount = 30;

// What kind of memory an event is about. Each kind is accounted on its own.
enum class MemoryKind : uint8_t {
  kDevice = 1,        // cudaMalloc / cuMemAlloc / pitch / 3D
  kManaged = 2,       // unified memory
  kPinnedHost = 3,    // page-locked host memory
  kPool = 4,          // stream-ordered allocations from a memory pool
  kPhysical = 5,      // VMM physical memory handle (cuMemCreate): address field holds the handle
  kMapping = 6,       // VMM mapping of physical memory into reserved address space
  kReservation = 7,   // VMM virtual address reservation (no memory)
};
inline constexpr uint8_t kMemoryKindMax = 7;

// What a PyTorch caching-allocator event (TorchEvent record) reports. Values are part of the
// format: append only.
enum class TorchAction : uint8_t {
  kAlloc = 1,          // a tensor block handed out
  kFreeRequested = 2,  // the block was released by its owner (may still be in use on a stream)
  kFreeCompleted = 3,  // the block is back in the cache
  kSegmentAlloc = 4,   // the allocator got memory from the device (cudaMalloc)
  kSegmentFree = 5,    // ... and gave it back
  kSegmentMap = 6,     // expandable segments: a range mapped
  kSegmentUnmap = 7,   // ... and unmapped
  kOom = 8,            // the allocator raised OutOfMemoryError: address = device free bytes
  kTag = 9,            // what a live tensor block is to training: address = the block (a storage's
                       // data pointer), size = a TensorCategory (the Python package's tags)
};
inline constexpr uint8_t kTorchActionMax = 9;

// What a tensor block is to a training step (TorchAction::kTag's size). Values are part of the
// format: append only; readers ignore tags of a category they do not know.
enum class TensorCategory : uint8_t {
  kParameter = 1,
  kGradient = 2,
  kOptimizerState = 3,
  kActivation = 4,  // saved for backward
};
inline constexpr uint8_t kTensorCategoryMax = 4;

enum class MarkerKind : uint8_t { kMark = 1, kStep = 2, kRangePush = 3, kRangePop = 4 };

// Times are nanoseconds of CLOCK_MONOTONIC since ProcessRecord::start_mono_ns.
struct ProcessRecord {
  uint64_t pid = 0;
  uint64_t ppid = 0;
  int64_t rank = -1;
  uint64_t start_wall_ns = 0;  // CLOCK_REALTIME at trace start
  uint64_t start_mono_ns = 0;
  std::string_view host;
  std::string_view command_line;  // arguments joined by spaces
  std::string_view executable;
};

struct ModuleRecord {
  uint64_t load_bias = 0;
  uint64_t start = 0;
  uint64_t size = 0;
  std::string_view build_id;  // raw bytes
  std::string_view path;
};

// A native stack, innermost frame first. The id is the stack's hash: writers on different threads
// may define the same stack twice, with identical frames.
struct StackRecord {
  uint64_t id = 0;
  uint32_t frame_count = 0;
  const uint64_t* frames = nullptr;  // encoder input
};

struct AllocRecord {
  uint64_t time_ns = 0;
  uint64_t thread_id = 0;
  int32_t device = 0;
  uint64_t stream = 0;
  Api api = Api::kUnknown;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stack_id = 0;  // 0: no stack
};

struct FreeRecord {
  uint64_t time_ns = 0;
  uint64_t thread_id = 0;
  int32_t device = 0;
  uint64_t stream = 0;
  Api api = Api::kUnknown;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t address = 0;
  uint64_t stack_id = 0;
  uint32_t result = 0;  // the call's return code (a failed free leaves the memory allocated)
};

struct AllocFailedRecord {
  uint64_t time_ns = 0;
  uint64_t thread_id = 0;
  int32_t device = 0;
  uint64_t stream = 0;
  Api api = Api::kUnknown;
  MemoryKind kind = MemoryKind::kDevice;
  uint64_t size = 0;
  uint32_t error = 0;
  uint64_t stack_id = 0;
};

struct MemInfoRecord {
  uint64_t time_ns = 0;
  int32_t device = 0;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

struct MarkerRecord {
  uint64_t time_ns = 0;
  uint64_t thread_id = 0;
  MarkerKind kind = MarkerKind::kMark;
  std::string_view name;
  uint64_t stack_id = 0;  // the caller's stack (0: none); absent in traces before v1.1 markers
};

struct DeviceRecord {
  int32_t device = 0;
  uint64_t total_bytes = 0;
  std::string_view name;
};

struct AttributeRecord {
  std::string_view key;  // e.g. "cuda.runtime_version"
  std::string_view value;
};

// Written last by a process that ends through exit, _exit, _Exit, quick_exit or exec. Format 3
// appends what was written before it, so a reader can tell what it did not get: the blocks before
// the one holding this record, the records in them and before this one in its block, and the
// errno of the first write that failed (0: none). Older writers have only time_ns.
struct EndRecord {
  uint64_t time_ns = 0;
  uint64_t blocks = 0;
  uint64_t records = 0;
  uint64_t write_error = 0;
  bool has_counts = false;  // decoded: the counts were present (format 3)
};

// Written by the shim's flusher after each periodic drain of every thread's buffer (format 1.1):
// time_ns is the clock read before the drain. Records after the mark were made at or after it,
// except a straggler made just before and buffered just after its thread's drain, so readers
// trust the mark before the latest one (docs/trace-format.md "Ordering").
struct FlushRecord {
  uint64_t time_ns = 0;
};

// A Python code object, written by a thread the first time one of its stacks uses it. code_id is
// a hash of the object's address and identity fields (see docs/trace-format.md): a code object
// that dies and whose address is reused by another gets another id.
struct PyCodeRecord {
  uint64_t code_id = 0;
  uint64_t first_line = 0;        // co_firstlineno
  std::string_view filename;      // co_filename, UTF-8 ("?" when unreadable)
  std::string_view name;          // co_qualname (co_name if unreadable)
  std::string_view line_table;    // co_linetable, raw (PEP 657 location table); may be empty
  uint8_t python_minor = 0;       // 3.x that wrote it (the table's format)
};

// One Python frame of a PyStack record.
inline constexpr uint8_t kPyFrameEntry = 1;  // flags bit 0: the outermost frame of one evaluation
                                             // loop invocation (_PyEval_EvalFrameDefault)
struct PyFrameRef {
  uint64_t code_id = 0;
  uint64_t instr_offset = 0;  // code units from the first instruction
  uint8_t flags = 0;
};

// The Python frames that go with the native Stack record of the same id, innermost first.
struct PyStackRecord {
  uint64_t stack_id = 0;
  uint32_t frame_count = 0;
  const PyFrameRef* frames = nullptr;  // encoder input
};

// One event of PyTorch's caching allocator (the torch bridge, libgpumemshim_torch.so).
struct TorchEventRecord {
  uint64_t time_ns = 0;
  uint64_t thread_id = 0;
  int32_t device = 0;
  uint64_t stream = 0;
  TorchAction action = TorchAction::kAlloc;
  uint64_t address = 0;  // kOom: the device's free bytes
  uint64_t size = 0;
  uint64_t stack_id = 0;  // 0: no stack
};

// A stack described by a label instead of frames: an event on autograd's device thread whose
// grad_fn the torch bridge named (label: the Node's C++ type name as typeid gives it).
struct StackLabelRecord {
  uint64_t stack_id = 0;
  std::string_view label;
};

// The device's own view of this process's memory, sampled by the shim's flusher from NVML (since
// 3.1): what nvidia-smi shows, to hold against what the trace explains.
inline constexpr uint8_t kProcessUsedKnown = 1;  // flags bit 0: process_used_bytes was read
struct ProcessMemoryRecord {
  uint64_t time_ns = 0;
  int32_t device = 0;  // the CUDA ordinal (as the process sees it, after CUDA_VISIBLE_DEVICES)
  uint8_t flags = 0;   // kProcessUsedKnown
  // This process's used memory on the device, as NVML lists it among the device's compute
  // processes. Unknown (flag clear) when NVML does not list this pid: another pid namespace (a
  // container) or a device that does not report per-process memory.
  uint64_t process_used_bytes = 0;
  uint64_t device_used_bytes = 0;  // every process's, and the driver's own
  uint64_t device_total_bytes = 0;
  bool process_used_known() const { return flags & kProcessUsedKnown; }
};

std::string_view api_name(Api api);
std::string_view torch_action_name(TorchAction action);
std::string_view tensor_category_name(TensorCategory category);
std::string_view memory_kind_name(MemoryKind kind);
std::string_view marker_kind_name(MarkerKind kind);

}  // namespace gpumemshim::format
