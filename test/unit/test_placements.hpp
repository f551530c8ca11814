#pragma once
// Placements (node of each rank) that the node schedules' tests prove their planners on.

#include <vector>

namespace agx_test {

/// `ppn` consecutive ranks per node (the last node takes the rest).
inline std::vector<int> blocked(int n, int ppn) {
  std::vector<int> node_of(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) node_of[static_cast<std::size_t>(r)] = r / ppn;
  return node_of;
}

/// Ranks dealt round-robin over `nodes` nodes.
inline std::vector<int> round_robin(int n, int nodes) {
  std::vector<int> node_of(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) node_of[static_cast<std::size_t>(r)] = r % nodes;
  return node_of;
}

/// Unequal nodes: sizes 1, 2, 3, ... cycling up to `largest` (node ids not in rank order).
inline std::vector<int> unequal(int n, int largest) {
  std::vector<int> node_of;
  int node = 0, size = 1;
  while (static_cast<int>(node_of.size()) < n) {
    for (int i = 0; i < size && static_cast<int>(node_of.size()) < n; ++i) node_of.push_back(1000 - node);
    ++node;
    size = size % largest + 1;
  }
  return node_of;
}

}  // namespace agx_test
