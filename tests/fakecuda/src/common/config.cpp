#include "config.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace fakecuda {
namespace {

struct FailRule {
  std::string name;
  std::uint64_t nth = 0;  // 0: every call
  std::atomic<std::uint64_t> calls{0};
};

struct State {
  Config cfg;
  std::vector<std::unique_ptr<FailRule>> rules;
};

bool parse_u64(const char* s, std::uint64_t* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 0);
  if (end == nullptr || *end != '\0') return false;
  *out = v;
  return true;
}

void warn(const char* var, const char* value) {
  std::fprintf(stderr, "fakecuda: ignoring invalid %s=%s\n", var, value);
}

void parse_rules(const char* spec, std::vector<std::unique_ptr<FailRule>>* rules) {
  std::string all(spec);
  std::size_t pos = 0;
  while (pos <= all.size()) {
    std::size_t comma = all.find(',', pos);
    if (comma == std::string::npos) comma = all.size();
    std::string item = all.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    auto rule = std::make_unique<FailRule>();
    std::size_t colon = item.find(':');
    rule->name = item.substr(0, colon);
    if (colon != std::string::npos) {
      std::uint64_t k = 0;
      if (!parse_u64(item.c_str() + colon + 1, &k) || k == 0) {
        warn("FAKECUDA_FAIL item", item.c_str());
        continue;
      }
      rule->nth = k;
    }
    rules->push_back(std::move(rule));
  }
}

State load() {
  State st;
  std::uint64_t v = 0;
  if (const char* s = std::getenv("FAKECUDA_TOTAL_MEM")) {
    if (parse_u64(s, &v) && v > 0)
      st.cfg.total_mem = v;
    else
      warn("FAKECUDA_TOTAL_MEM", s);
  }
  if (const char* s = std::getenv("FAKECUDA_DEVICES")) {
    if (parse_u64(s, &v) && v <= 64)
      st.cfg.devices = static_cast<int>(v);
    else
      warn("FAKECUDA_DEVICES", s);
  }
  if (const char* s = std::getenv("FAKECUDA_OOM_AFTER")) {
    if (parse_u64(s, &v))
      st.cfg.oom_after = v;
    else
      warn("FAKECUDA_OOM_AFTER", s);
  }
  if (const char* s = std::getenv("FAKECUDA_FAIL_CODE")) {
    if (parse_u64(s, &v) && v > 0 && v < 100000)
      st.cfg.fail_code = static_cast<int>(v);
    else
      warn("FAKECUDA_FAIL_CODE", s);
  }
  if (const char* s = std::getenv("FAKECUDA_FAIL")) parse_rules(s, &st.rules);
  auto flag = [](const char* name, bool& out) {
    if (const char* s = std::getenv(name)) {
      if (std::strcmp(s, "0") == 0 || std::strcmp(s, "1") == 0)
        out = s[0] == '1';
      else
        warn(name, s);
    }
  };
  auto number = [&](const char* name, std::uint64_t& out) {
    if (const char* s = std::getenv(name)) {
      if (parse_u64(s, &v))
        out = v;
      else
        warn(name, s);
    }
  };
  flag("FAKECUDA_NVML", st.cfg.nvml);
  number("FAKECUDA_NVML_CONTEXT_BYTES", st.cfg.nvml_context_bytes);
  number("FAKECUDA_NVML_OTHER_BYTES", st.cfg.nvml_other_bytes);
  number("FAKECUDA_NVML_PID", st.cfg.nvml_pid);
  flag("FAKECUDA_NVML_MIG", st.cfg.nvml_mig);
  number("FAKECUDA_NVML_INIT_DELAY_MS", st.cfg.nvml_init_delay_ms);
  number("FAKECUDA_NVML_QUERY_DELAY_MS", st.cfg.nvml_query_delay_ms);
  if (const char* s = std::getenv("FAKECUDA_NVML_INIT_MARK")) st.cfg.nvml_init_mark = s;
  return st;
}

State& state() {
  static State st = load();
  return st;
}

}  // namespace

const Config& config() {
  return state().cfg;
}

int injected_failure(const char* name) {
  State& st = state();
  int code = 0;
  for (auto& rule : st.rules) {
    if (std::strcmp(rule->name.c_str(), name) != 0) continue;
    std::uint64_t n = rule->calls.fetch_add(1, std::memory_order_relaxed) + 1;
    if (rule->nth == 0 || rule->nth == n) code = st.cfg.fail_code;
  }
  return code;
}

}  // namespace fakecuda
