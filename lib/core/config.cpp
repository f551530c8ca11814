#include "core/config.hpp"

#include <agx/error.hpp>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <string>

namespace agx {
namespace {

void invalid(Config& c, const char* name, const char* text, const char* want) {
  c.invalid += std::string(c.invalid.empty() ? "" : "; ") + name + "='" + text + "' is not " + want;
}

std::optional<FlipSeam> parse_flip(const char* text) {
  char* end = nullptr;
  const long rank = std::strtol(text, &end, 10);
  if (end == text || *end != ':' || rank < 0 || rank > INT_MAX) return std::nullopt;
  const char* second = end + 1;
  const long round = std::strtol(second, &end, 10);
  if (end == second || *end != '\0' || round < 0 || round > INT_MAX) return std::nullopt;
  return FlipSeam{static_cast<int>(rank), static_cast<int>(round)};
}

}  // namespace

bool is_set_flag(const char* text) {
  if (text == nullptr) return false;
  const std::string s(text);
  for (const char* yes : {"1", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
    if (s == yes) return true;
  return false;
}

namespace {

Config read_environment() {
  Config c;
  if (const char* algo = std::getenv("AGX_ALGO"); algo != nullptr && *algo != '\0') {
    if (auto a = parse_algorithm_choice(algo, &c.invalid_algo_reason)) {
      if (a->id != Algorithm::automatic) c.forced = *a;
    } else {
      c.invalid_algo = algo;
    }
  }
  if (const char* max = std::getenv("AGX_MAX_MESSAGE_BYTES"); max != nullptr && *max != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(max, &end, 10);
    if (end != max && *end == '\0' && v > 0 && v <= INT_MAX) c.max_message_bytes = v;
  }
  if (const char* d = std::getenv("AGX_DESCRIPTOR_CACHE"); d != nullptr && *d != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(d, &end, 10);
    if (end != d && *end == '\0' && *d != '-' && v <= 4096) c.descriptor_cache = v;
    else invalid(c, "AGX_DESCRIPTOR_CACHE", d, "a number of entries from 0 to 4096");
  }
  if (const char* check = std::getenv("AGX_CHECK"); check != nullptr)
    c.check = std::string(check) == "1";
  if (const char* t = std::getenv("AGX_TIMEOUT"); t != nullptr && *t != '\0') {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end != t && *end == '\0' && std::isfinite(v) && v >= 0) c.timeout_seconds = v;
    else invalid(c, "AGX_TIMEOUT", t, "a number of seconds (0: off)");
  }
  if (const char* a = std::getenv("AGX_TIMEOUT_ACTION"); a != nullptr && *a != '\0') {
    const std::string action = a;
    if (action == "abort" || action == "error") c.timeout_abort = action == "abort";
    else invalid(c, "AGX_TIMEOUT_ACTION", a, "'abort' or 'error'");
  }
  if (const char* i = std::getenv("AGX_INTEGRITY"); i != nullptr)
    c.integrity = std::string(i) == "1";
  if (const char* f = std::getenv("AGX_TEST_FLIP"); f != nullptr && *f != '\0') {
    c.flip = parse_flip(f);
    if (!c.flip) invalid(c, "AGX_TEST_FLIP", f, "<rank>:<round>");
  }
  if (const char* t = std::getenv("AGX_TUNING_FILE"); t != nullptr) c.tuning_file = t;
  c.verbose = is_set_flag(std::getenv("AGX_VERBOSE"));
  return c;
}

}  // namespace

const Config& config() {
  static const Config c = read_environment();
  return c;
}

void check_config() {
  const Config& c = config();
  if (!c.invalid.empty()) throw Error(MPI_ERR_ARG, "agx: " + c.invalid);
}

}  // namespace agx
