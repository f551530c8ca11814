#pragma once
// AGX_TEST_MAX_RANKS caps the rank counts of the unit tests' largest proofs (unset: no
// cap). scripts/test.sh sets 256 for the sanitizer build, where the proofs up to 1024
// ranks took 90% of the unit run (about 125 s); the release build proves them in full.

#include <cstdlib>
#include <limits>

namespace agx_test {

inline int max_ranks() {
  static const int cap = [] {
    const char* v = std::getenv("AGX_TEST_MAX_RANKS");
    const int n = v != nullptr ? std::atoi(v) : 0;
    return n > 0 ? n : std::numeric_limits<int>::max();
  }();
  return cap;
}

}  // namespace agx_test
