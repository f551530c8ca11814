#pragma once
// Block sizes and offsets the unit tests run schedules under (validate_messages):
// test_schedules.cpp for the point-to-point planners, test_node_schedules.cpp for the
// node planners.

#include <cstddef>
#include <random>
#include <vector>

namespace agx_test {

/// Block sizes: 0 equal, 1 uneven with zeros, 2 one huge block among zeros, 3 all zero.
inline std::vector<std::size_t> sizes_for(int n, int pattern) {
  std::vector<std::size_t> bytes(static_cast<std::size_t>(n));
  std::mt19937 rng(static_cast<unsigned>(n * 7 + pattern));
  for (int i = 0; i < n; ++i) {
    switch (pattern) {
      case 0: bytes[i] = 24; break;
      case 1: bytes[i] = (i % 3 == 1) ? 0 : rng() % 50; break;
      case 2: bytes[i] = (i == n / 2) ? 5000 : 0; break;
      default: bytes[i] = 0;
    }
  }
  return bytes;
}
constexpr int size_patterns = 4;

/// Offsets in reverse block order with gaps between blocks.
inline std::vector<std::size_t> reversed_offsets(const std::vector<std::size_t>& bytes) {
  std::vector<std::size_t> offsets(bytes.size());
  std::size_t at = 3;
  for (std::size_t i = bytes.size(); i-- > 0;) {
    offsets[i] = at;
    at += bytes[i] + 3;  // gaps between blocks
  }
  return offsets;
}

}  // namespace agx_test
