// torch.cuda.memory._snapshot()'s layout, as read by torch/cuda/_memory_viz.py and memory_viz:
//   {"segments": [{"device", "address", "total_size", "allocated_size", "active_size",
//                  "requested_size", "stream", "segment_type", "segment_pool_id", "is_expandable",
//                  "frames", "blocks": [{"address", "size", "requested_size", "state", "frames"}]}],
//    "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames"}, ...] per device]}
// Frames are {"filename", "line", "name"}, innermost first.
#include "gpumemshim/analyzer/render.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>

#include "replay/load.h"
#include "report/stack_view.h"

namespace gpumemshim::analyzer {

using nlohmann::json;

namespace {

struct Block {
  uint64_t size = 0;
  uint64_t stream = 0;
  int32_t device = 0;
  uint64_t stack_id = 0;
};

class SnapshotBuilder {
 public:
  explicit SnapshotBuilder(const LoadedTrace& trace) : trace_(trace), stacks_(trace) {}

  const json& frames(uint64_t stack_id) {
    auto [it, inserted] = frames_.try_emplace(stack_id);
    if (inserted) {
      it->second = json::array();
      for (const Frame& f : stacks_.frames(stack_id)) {
        std::string name = f.function.empty() ? fmt_pc(f.pc) : f.function;
        it->second.push_back({{"filename", f.file.empty() ? f.module : f.file}, {"line", f.line}, {"name", name}});
      }
    }
    return it->second;
  }

  // Entries are kept light (no frames) until the end: only the last kMaxMemvizTraceEntries of each
  // device are written, and a long trace has millions.
  void trace_entry(int32_t device, std::string_view action, uint64_t addr, uint64_t size, uint64_t stream,
                   uint64_t time_ns, uint64_t stack_id) {
    if (device < 0) device = 0;
    auto d = static_cast<size_t>(device);
    if (traces_.size() <= d) traces_.resize(d + 1);
    std::deque<Entry>& q = traces_[d];
    q.push_back(Entry{action, addr, size, stream, (trace_.process.start_wall_ns + time_ns) / 1000, stack_id});
    if (q.size() > kMaxMemvizTraceEntries) q.pop_front();
  }

  json device_traces() {
    json out = json::array();
    for (const std::deque<Entry>& q : traces_) {
      json entries = json::array();
      for (const Entry& e : q)
        entries.push_back({{"action", std::string(e.action)}, {"addr", e.addr}, {"size", e.size},
                           {"stream", e.stream}, {"time_us", e.time_us}, {"frames", frames(e.stack_id)}});
      out.push_back(std::move(entries));
    }
    return out;
  }

 private:
  static std::string fmt_pc(uint64_t pc) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(pc));
    return buf;
  }
  const LoadedTrace& trace_;
  StackView stacks_;
  std::unordered_map<uint64_t, json> frames_;
  struct Entry {
    std::string_view action;  // a static name
    uint64_t addr, size, stream, time_us, stack_id;
  };
  std::vector<std::deque<Entry>> traces_;
};

json segment_json(uint64_t address, const Block& seg, json blocks, json frames, bool expandable) {
  uint64_t allocated = 0;
  for (const json& b : blocks)
    if (b["state"] == "active_allocated") allocated += b["size"].get<uint64_t>();
  return {{"device", seg.device}, {"address", address}, {"total_size", seg.size},
          {"allocated_size", allocated}, {"active_size", allocated}, {"requested_size", allocated},
          {"stream", seg.stream}, {"segment_type", seg.size <= (1u << 20) ? "small" : "large"},
          {"segment_pool_id", json::array({0, 0})}, {"is_expandable", expandable},
          {"frames", std::move(frames)}, {"blocks", std::move(blocks)}};
}

// With the torch bridge's events: PyTorch's own segments and tensor blocks.
json torch_snapshot(const LoadedTrace& trace, const std::vector<format::TimedEvent>& events) {
  SnapshotBuilder b(trace);
  std::map<uint64_t, Block> segments, blocks;
  bool expandable = false;
  for (const format::TimedEvent& e : events) {
    const auto* t = std::get_if<format::TorchEventRecord>(&e);
    // Tags are gpumemshim's own, not an allocator action memory_viz knows.
    if (!t || t->action == format::TorchAction::kTag) continue;
    b.trace_entry(t->device, format::torch_action_name(t->action), t->address, t->size, t->stream,
                  t->time_ns, t->stack_id);
    Block blk{t->size, t->stream, t->device, t->stack_id};
    switch (t->action) {
      case format::TorchAction::kSegmentMap: expandable = true; [[fallthrough]];
      case format::TorchAction::kSegmentAlloc: segments[t->address] = blk; break;
      case format::TorchAction::kSegmentUnmap:
      case format::TorchAction::kSegmentFree: segments.erase(t->address); break;
      case format::TorchAction::kAlloc: blocks[t->address] = blk; break;
      case format::TorchAction::kFreeCompleted: blocks.erase(t->address); break;
      default: break;
    }
  }
  json segs = json::array();
  for (const auto& [address, seg] : segments) {
    json bl = json::array();
    uint64_t cursor = address, end = address + seg.size;
    for (auto it = blocks.lower_bound(address); it != blocks.end() && it->first < end; ++it) {
      uint64_t size = std::min(it->second.size, end - it->first);
      if (it->first > cursor) bl.push_back({{"address", cursor}, {"size", it->first - cursor},
                                            {"requested_size", 0}, {"state", "inactive"}, {"frames", json::array()}});
      bl.push_back({{"address", it->first}, {"size", size}, {"requested_size", size},
                    {"state", "active_allocated"}, {"frames", b.frames(it->second.stack_id)}});
      cursor = it->first + size;
    }
    if (cursor < end) bl.push_back({{"address", cursor}, {"size", end - cursor}, {"requested_size", 0},
                                    {"state", "inactive"}, {"frames", json::array()}});
    segs.push_back(segment_json(address, seg, std::move(bl), b.frames(seg.stack_id), expandable));
  }
  return {{"segments", std::move(segs)}, {"device_traces", b.device_traces()}};
}

// Without them: every runtime allocation of device memory is a segment holding one block.
json runtime_snapshot(const LoadedTrace& trace, const std::vector<format::TimedEvent>& events) {
  SnapshotBuilder b(trace);
  std::map<uint64_t, Block> live;  // device, managed and pool addresses share one space
  auto tracked = [](format::MemoryKind k) { return is_device_memory_kind(k) && k != format::MemoryKind::kPhysical; };
  for (const format::TimedEvent& e : events) {
    if (const auto* a = std::get_if<format::AllocRecord>(&e)) {
      if (!tracked(a->kind)) continue;
      live[a->address] = Block{a->size, a->stream, a->device, a->stack_id};
      b.trace_entry(a->device, "segment_alloc", a->address, a->size, a->stream, a->time_ns, a->stack_id);
      b.trace_entry(a->device, "alloc", a->address, a->size, a->stream, a->time_ns, a->stack_id);
    } else if (const auto* f = std::get_if<format::FreeRecord>(&e)) {
      if (!tracked(f->kind) || f->result != 0 || f->address == 0) continue;
      auto it = live.find(f->address);
      if (it == live.end()) continue;
      const Block& blk = it->second;
      for (std::string_view action : {"free_requested", "free_completed", "segment_free"})
        b.trace_entry(blk.device, action, f->address, blk.size, blk.stream, f->time_ns, f->stack_id);
      live.erase(it);
    } else if (const auto* x = std::get_if<format::AllocFailedRecord>(&e)) {
      if (tracked(x->kind)) b.trace_entry(x->device, "oom", 0, x->size, x->stream, x->time_ns, x->stack_id);
    }
  }
  json segs = json::array();
  for (const auto& [address, blk] : live) {
    json block = {{"address", address}, {"size", blk.size}, {"requested_size", blk.size},
                  {"state", "active_allocated"}, {"frames", b.frames(blk.stack_id)}};
    segs.push_back(segment_json(address, blk, json::array({block}), b.frames(blk.stack_id), false));
  }
  return {{"segments", std::move(segs)}, {"device_traces", b.device_traces()}};
}

// ---- pickle protocol 2 ----

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// Valid UTF-8 passes; every byte of an invalid sequence becomes U+FFFD (Python's str must decode).
std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && n == 2) ok = c >= 0xc2;
    if (ok && n == 3) {
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);  // overlong, surrogates
    }
    if (ok && n == 4) {
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = c <= 0xf4 && !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

void put_int(std::string& out, int64_t v, bool is_unsigned, uint64_t uv) {
  if (is_unsigned && uv > static_cast<uint64_t>(INT64_MAX)) {
    out += '\x8a';  // LONG1: little-endian two's complement, 9 bytes keeps the sign bit clear
    out += static_cast<char>(9);
    for (int i = 0; i < 8; ++i) out += static_cast<char>((uv >> (8 * i)) & 0xff);
    out += '\0';
    return;
  }
  if (v >= 0 && v < 256) {
    out += 'K';  // BININT1
    out += static_cast<char>(v);
  } else if (v >= 0 && v < 65536) {
    out += 'M';  // BININT2
    out += static_cast<char>(v & 0xff);
    out += static_cast<char>(v >> 8);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out += 'J';  // BININT
    put_u32(out, static_cast<uint32_t>(static_cast<int32_t>(v)));
  } else {
    out += '\x8a';
    out += static_cast<char>(8);
    auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
  }
}

void put_str(std::string& out, const std::string& s) {
  std::string u = valid_utf8(s);
  out += 'X';  // BINUNICODE
  put_u32(out, static_cast<uint32_t>(u.size()));
  out += u;
}

void put_value(std::string& out, const json& v) {
  switch (v.type()) {
    case json::value_t::null: out += 'N'; break;
    case json::value_t::boolean: out += v.get<bool>() ? '\x88' : '\x89'; break;
    case json::value_t::number_unsigned: put_int(out, static_cast<int64_t>(v.get<uint64_t>()), true, v.get<uint64_t>()); break;
    case json::value_t::number_integer: put_int(out, v.get<int64_t>(), false, 0); break;
    case json::value_t::number_float: {
      out += 'G';  // BINFLOAT, big-endian
      double d = v.get<double>();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      for (int i = 7; i >= 0; --i) out += static_cast<char>((bits >> (8 * i)) & 0xff);
      break;
    }
    case json::value_t::string: put_str(out, v.get<std::string>()); break;
    case json::value_t::array:
      out += ']';  // EMPTY_LIST
      if (!v.empty()) {
        out += '(';  // MARK
        for (const json& x : v) put_value(out, x);
        out += 'e';  // APPENDS
      }
      break;
    case json::value_t::object:
      out += '}';  // EMPTY_DICT
      if (!v.empty()) {
        out += '(';
        for (auto it = v.begin(); it != v.end(); ++it) {
          put_str(out, it.key());
          put_value(out, it.value());
        }
        out += 'u';  // SETITEMS
      }
      break;
    default: out += 'N'; break;  // binary, discarded: not produced here
  }
}

}  // namespace

std::string to_pickle(const json& value) {
  std::string out = "\x80\x02";  // PROTO 2
  put_value(out, value);
  out += '.';  // STOP
  return out;
}

json memviz_snapshot(const std::string& path) {
  LoadedTrace trace = load_trace(path);
  format::TraceReader reader = reading_trace([&] { return format::TraceReader(path); });
  std::vector<format::TimedEvent> events = reading_trace([&] { return reader.timed_events(); });
  bool has_torch = std::any_of(events.begin(), events.end(), [](const format::TimedEvent& e) {
    return std::holds_alternative<format::TorchEventRecord>(e);
  });
  return has_torch ? torch_snapshot(trace, events) : runtime_snapshot(trace, events);
}

}  // namespace gpumemshim::analyzer
