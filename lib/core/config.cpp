#include "core/config.hpp"

#include <climits>
#include <cstdlib>
#include <string>

namespace agx {
namespace {

Config read_environment() {
  Config c;
  if (const char* algo = std::getenv("AGX_ALGO"); algo != nullptr && *algo != '\0') {
    if (auto a = parse_algorithm(algo)) {
      if (*a != Algorithm::automatic) c.forced = *a;
    } else {
      c.invalid_algo = algo;
    }
  }
  if (const char* max = std::getenv("AGX_MAX_MESSAGE_BYTES"); max != nullptr && *max != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(max, &end, 10);
    if (end != max && *end == '\0' && v > 0 && v <= INT_MAX) c.max_message_bytes = v;
  }
  if (const char* check = std::getenv("AGX_CHECK"); check != nullptr)
    c.check = std::string(check) == "1";
  return c;
}

}  // namespace

const Config& config() {
  static const Config c = read_environment();
  return c;
}

}  // namespace agx
