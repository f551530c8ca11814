// Reads the interposer's environment variables once.

#include "pmpi/settings.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

namespace agx::pmpi {
namespace {

/// "1", "yes", "true", "on" (any case of the first letter) count as set.
bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string_view s(v);
  return s == "1" || s == "yes" || s == "Yes" || s == "YES" || s == "true" || s == "True" ||
         s == "TRUE" || s == "on" || s == "On" || s == "ON";
}

Settings read_settings() {
  Settings s;
  s.disabled = env_flag("AGX_DISABLE");
  s.verbose = env_flag("AGX_VERBOSE");
  s.summary = env_flag("AGX_SUMMARY");
  if (const char* algo = std::getenv("AGX_ALGO"); algo != nullptr && *algo != '\0') {
    s.algo_text = algo;
    const auto a = parse_algorithm_choice(algo, &s.algo_error);
    s.algo_set = !a || a->id != Algorithm::automatic;
    if (a && a->id != Algorithm::automatic) s.forced = *a;
  }
  if (const char* c = std::getenv("AGX_COMPRESS"); c != nullptr && *c != '\0') {
    const std::string_view v(c);
    if (v == "auto") s.compress = Lossless::automatic;
    else if (v == "lz4") s.compress = Lossless::lz4;
    else if (v == "zstd") s.compress = Lossless::zstd;
    else if (v != "off")
      s.compress_error = "AGX_COMPRESS='" + std::string(v) + "' is not off, auto, lz4 or zstd";
  }
  if (const char* m = std::getenv("AGX_COMPRESS_MIN_BYTES"); m != nullptr && *m != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(m, &end, 10);
    if (end == m || *end != '\0' || *m == '-')
      s.compress_error = "AGX_COMPRESS_MIN_BYTES='" + std::string(m) + "' is not a byte count";
    else
      s.compress_min_bytes = static_cast<std::size_t>(v);
  }
  return s;
}

}  // namespace

const Settings& settings() {
  static const Settings s = read_settings();
  return s;
}

}  // namespace agx::pmpi
