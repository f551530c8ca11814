// lib/core linked alone: its objects, the planners of lib/core/planners/ included, and
// nothing else of lib/ (test/unit/meson.build builds it
// from exactly those objects, so a call from lib/core into lib/hier, lib/cuda or lib/api
// fails this program's link). Running it plans and proves one point-to-point and one
// node schedule through lib/core's own code. No MPI calls.

#include "core/planner.hpp"
#include "core/validator.hpp"

#include <cstdio>
#include <string>
#include <vector>

int main() {
  using namespace agx;
  const std::string ring = validate(planner_for(Algorithm::ring), 5);
  NodeShape shape;
  shape.node_of = {0, 0, 1, 1, 1};
  std::vector<Schedule> hier;
  for (int r = 0; r < 5; ++r) hier.push_back(plan_node_algorithm(Algorithm::hierarchical, shape, r));
  const std::string node = validate(hier, shape.node_of);
  if (!ring.empty() || !node.empty()) {
    std::fprintf(stderr, "ring: %s\nhierarchical: %s\n", ring.c_str(), node.c_str());
    return 1;
  }
  return 0;
}
