// Reading every AGX_* variable, once per process (settings.hpp; docs/environment.md).

#include "core/settings.hpp"

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace agx {
namespace {

/// One variable at a time: its text, and where an unreadable one is recorded.
class Reader {
 public:
  Reader(const Environment& env, std::vector<InvalidSetting>& invalid) : env_(env), invalid_(invalid) {}

  /// The text; nullptr when unset (or empty, where `empty_is_unset`).
  const char* text(const char* name, bool empty_is_unset = true) const {
    const char* v = env_(name);
    return v == nullptr || (empty_is_unset && *v == '\0') ? nullptr : v;
  }

  void invalid(const char* name, const char* text, std::string reason) {
    invalid_.push_back({name, text, std::move(reason)});
  }

  /// A decimal count from `low` to `high`; nullopt (and an entry) otherwise.
  std::optional<unsigned long long> count(const char* name, unsigned long long low,
                                          unsigned long long high, const char* what) {
    const char* t = text(name);
    if (t == nullptr) return std::nullopt;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(t, &end, 10);
    if (end != t && *end == '\0' && *t != '-' && v >= low && v <= high) return v;
    invalid(name, t, std::string("is not ") + what);
    return std::nullopt;
  }

 private:
  const Environment& env_;
  std::vector<InvalidSetting>& invalid_;
};

std::optional<FlipSeam> parse_flip(const char* text) {
  char* end = nullptr;
  const long rank = std::strtol(text, &end, 10);
  if (end == text || *end != ':' || rank < 0 || rank > INT_MAX) return std::nullopt;
  const char* second = end + 1;
  const long round = std::strtol(second, &end, 10);
  if (end == second || *end != '\0' || round < 0 || round > INT_MAX) return std::nullopt;
  return FlipSeam{static_cast<int>(rank), static_cast<int>(round)};
}

std::optional<CorruptSeam> parse_corrupt(const std::string& v) {
  const auto colon = v.find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  const std::string kind = v.substr(colon + 1);
  if (kind != "flip" && kind != "lie" && kind != "truncate" && kind != "huge") return std::nullopt;
  char* end = nullptr;
  const long rank = std::strtol(v.c_str(), &end, 10);
  if (end != v.c_str() + colon || rank < 0 || rank > INT_MAX) return std::nullopt;
  return CorruptSeam{static_cast<int>(rank), kind};
}

std::optional<KillSeam> parse_kill(const char* v) {
  KillSeam s;
  char point[16] = {};
  int used = 0;
  if (std::sscanf(v, "%d:%15[a-z]:%u%n", &s.local, point, &s.n, &used) != 3 || v[used] != '\0')
    return std::nullopt;
  const std::string p = point;
  s.point = p == "created" ? 0 : p == "mapped" ? 1 : p == "agreed" ? 2 : -1;
  if (s.point < 0 || s.local < 0) return std::nullopt;
  return s;
}

void read_core(Reader& r, CoreSettings& c) {
  if (const char* algo = r.text("AGX_ALGO")) {
    c.algo_text = algo;
    std::string why;
    if (auto a = parse_algorithm_choice(algo, &why)) {
      if (a->id != Algorithm::automatic) c.forced = *a;
    } else {
      r.invalid("AGX_ALGO", algo, why);
    }
  }
  if (auto v = r.count("AGX_MAX_MESSAGE_BYTES", 1, INT_MAX, "a byte count from 1 to INT_MAX"))
    c.max_message_bytes = *v;
  if (auto v = r.count("AGX_DESCRIPTOR_CACHE", 0, 4096, "a number of entries from 0 to 4096"))
    c.descriptor_cache = *v;
  if (const char* check = r.text("AGX_CHECK", false)) c.check = std::string(check) == "1";
  if (const char* t = r.text("AGX_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end != t && *end == '\0' && std::isfinite(v) && v >= 0) c.timeout_seconds = v;
    else r.invalid("AGX_TIMEOUT", t, "is not a number of seconds (0: off)");
  }
  if (const char* a = r.text("AGX_TIMEOUT_ACTION")) {
    const std::string action = a;
    if (action == "abort" || action == "error") c.timeout_abort = action == "abort";
    else r.invalid("AGX_TIMEOUT_ACTION", a, "is not 'abort' or 'error'");
  }
  if (const char* i = r.text("AGX_INTEGRITY", false)) c.integrity = std::string(i) == "1";
  if (const char* f = r.text("AGX_TEST_FLIP")) {
    c.flip = parse_flip(f);
    if (!c.flip) r.invalid("AGX_TEST_FLIP", f, "is not <rank>:<round>");
  }
  if (const char* f = r.text("AGX_TEST_SPLIT_FLAGS", false)) c.split_flags = std::string(f) == "1";
  if (const char* f = r.text("AGX_TEST_CORRUPT_BLOCK")) {
    c.corrupt = parse_corrupt(f);
    if (!c.corrupt) r.invalid("AGX_TEST_CORRUPT_BLOCK", f, "is not <rank>:<flip|lie|truncate|huge>");
  }
  if (const char* t = r.text("AGX_TUNING_FILE", false)) c.tuning_file = t;
  if (const char* s = r.text("AGX_COMPRESS_BYTES_PER_S")) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end != s && *end == '\0' && std::isfinite(v) && v > 0) c.compress_bytes_per_s = v;
    else r.invalid("AGX_COMPRESS_BYTES_PER_S", s, "is not a positive number");
  }
  if (const char* p = r.text("AGX_PROGRESS_THREAD", false)) c.progress_thread = std::string(p) == "1";
  c.verbose = is_set_flag(r.text("AGX_VERBOSE", false));
}

void read_node(Reader& r, NodeSettings& s) {
  if (const char* inter = r.text("AGX_HIER_INTER")) {
    std::string why;
    const auto a = parse_algorithm_choice(inter, &why);
    if (a && a->id != Algorithm::automatic && a->id != Algorithm::hierarchical &&
        a->id != Algorithm::shared_memory)
      s.inter = *a;
    else if (!a || a->id != Algorithm::automatic)
      r.invalid("AGX_HIER_INTER", inter,
                a ? "names no point-to-point algorithm" : "names no point-to-point algorithm (" + why + ")");
  }
  if (auto v = r.count("AGX_HIER_LEADERS", 1, 1024, "a number of leaders from 1 to 1024"))
    s.leaders = static_cast<int>(*v);
  if (auto v = r.count("AGX_SHM_CHUNK_BYTES", 4096, 1ull << 30, "a byte count from 4096 to 2^30"))
    s.chunk_bytes = *v, s.chunk_set = true;
  if (auto v = r.count("AGX_CMA", 0, ULLONG_MAX, "a number (0: off)")) s.cma = *v != 0;
  if (auto v = r.count("AGX_CMA_MIN_BYTES", 0, ULLONG_MAX, "a byte count")) s.cma_min_bytes = *v;
  if (const char* w = r.text("AGX_WAIT")) {
    const std::string text = w;
    if (text == "auto") s.wait = NodeSettings::Wait::automatic;
    else if (text == "yield") s.wait = NodeSettings::Wait::yield;
    else if (text == "sleep") s.wait = NodeSettings::Wait::sleep;
    else r.invalid("AGX_WAIT", w, "is not auto, yield or sleep");
  }
  if (const char* d = r.text("AGX_NODE_DETECT")) {
    const std::string text = d;
    if (text == "mpi") s.node_detect_mpi = true;
    else if (text != "host") r.invalid("AGX_NODE_DETECT", d, "is not host or mpi");
  }
  if (const char* t = r.text("AGX_VIRTUAL_NODES", false)) s.virtual_nodes = t;
  if (const char* t = r.text("AGX_VIRTUAL_NODE_SIZE", false)) s.virtual_node_size = t;
  if (const char* v = r.text("AGX_DIRECT_WRITE")) s.direct_write = std::string(v) != "0";
  if (auto v = r.count("AGX_DIRECT_WRITE_MIN_BYTES", 0, ULLONG_MAX, "a byte count"))
    s.direct_write_min_bytes = *v;
  if (const char* k = r.text("AGX_TEST_KILL_SEGMENT")) {
    if (auto seam = parse_kill(k)) s.kill_segment = *seam;
    else r.invalid("AGX_TEST_KILL_SEGMENT", k, "is not <local rank>:<created|mapped|agreed>:<n>");
  }
}

void read_device(Reader& r, DeviceSettings& s) {
  if (const char* p = r.text("AGX_CUDA_PATH"); p != nullptr && std::string(p) != "auto") {
    if (auto path = parse_device_path(p)) s.forced = *path;
    else r.invalid("AGX_CUDA_PATH", p, "is not auto, aware, staging or ipc");
  }
  if (auto v = r.count("AGX_CUDA_CHUNK_BYTES", 1, 1ull << 30, "a byte count from 1 to 2^30"))
    s.chunk_bytes = *v;
  if (auto v = r.count("AGX_CUDA_STAGING_BYTES", 4096, 1ull << 40, "a byte count from 4096 to 2^40"))
    s.staging_bytes = *v;
  if (const char* a = r.text("AGX_CUDA_AWARE_MPI")) {  // 1 or 0 (also yes/no, true/false, on/off)
    const std::string v = a;
    if (v == "1" || v == "yes" || v == "true" || v == "on") s.mpi_aware = true;
    else if (v == "0" || v == "no" || v == "false" || v == "off") s.mpi_aware = false;
    else r.invalid("AGX_CUDA_AWARE_MPI", a, "is not 1 or 0");
  }
  if (const char* o = r.text("AGX_CUDA")) s.off = std::string(o) == "off" || std::string(o) == "0";
}

void read_interposer(Reader& r, InterposerSettings& s) {
  s.disabled = is_set_flag(r.text("AGX_DISABLE", false));
  s.summary = is_set_flag(r.text("AGX_SUMMARY", false));
  if (const char* c = r.text("AGX_COMPRESS")) {
    const std::string v = c;
    if (v == "auto") s.compress = Lossless::automatic;
    else if (v == "lz4") s.compress = Lossless::lz4;
    else if (v == "zstd") s.compress = Lossless::zstd;
    else if (v != "off") r.invalid("AGX_COMPRESS", c, "is not off, auto, lz4 or zstd");
  }
  if (auto v = r.count("AGX_COMPRESS_MIN_BYTES", 0, ULLONG_MAX, "a byte count"))
    s.compress_min_bytes = static_cast<std::size_t>(*v);
  if (const char* a = r.text("AGX_ALLOC_MEM", false)) s.alloc_mem = std::string(a) != "0";
}

}  // namespace

bool is_set_flag(const char* text) {
  if (text == nullptr) return false;
  const std::string s(text);
  for (const char* yes : {"1", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
    if (s == yes) return true;
  return false;
}

std::optional<DevicePath> parse_device_path(std::string_view name) {
  for (DevicePath p : {DevicePath::aware, DevicePath::staging, DevicePath::ipc})
    if (to_string(p) == name) return p;
  return std::nullopt;
}

const InvalidSetting* ProcessSettings::invalid_of(std::string_view variable) const {
  for (const InvalidSetting& i : invalid)
    if (i.variable == variable) return &i;
  return nullptr;
}

std::string ProcessSettings::invalid_message() const {
  std::string all;
  for (const InvalidSetting& i : invalid)
    if (i.variable != "AGX_ALGO") all += (all.empty() ? "agx: " : "; ") + i.message();
  return all;
}

ProcessSettings read_settings(const Environment& env) {
  ProcessSettings s;
  Reader r(env, s.invalid);
  read_core(r, s.core);
  read_node(r, s.node);
  read_device(r, s.device);
  read_interposer(r, s.interposer);
  return s;
}

std::atomic<const ProcessSettings*> detail::read_once{nullptr};

const ProcessSettings& detail::read_process_settings() {
  static const ProcessSettings s = read_settings([](const char* name) { return std::getenv(name); });
  read_once.store(&s, std::memory_order_release);
  return s;
}

}  // namespace agx
