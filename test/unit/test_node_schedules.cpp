// shared_memory and hierarchical as schedules (lib/core/node_planner.cpp), proven by the
// validator over placements up to 1024 ranks, and broken variants rejected. No MPI.

#include <catch2/catch.hpp>

#include <agx/error.hpp>

#include "core/cost_model.hpp"
#include "core/planner.hpp"
#include "core/validator.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "test_limits.hpp"

using namespace agx;

namespace {

// `ppn` consecutive ranks per node (the last node takes the rest).
std::vector<int> blocked(int n, int ppn) {
  std::vector<int> node_of(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) node_of[static_cast<std::size_t>(r)] = r / ppn;
  return node_of;
}

// Ranks dealt round-robin over `nodes` nodes.
std::vector<int> round_robin(int n, int nodes) {
  std::vector<int> node_of(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) node_of[static_cast<std::size_t>(r)] = r % nodes;
  return node_of;
}

// Unequal nodes: sizes 1, 2, 3, ... cycling up to `largest` (node ids not in rank order).
std::vector<int> unequal(int n, int largest) {
  std::vector<int> node_of;
  int node = 0, size = 1;
  while (static_cast<int>(node_of.size()) < n) {
    for (int i = 0; i < size && static_cast<int>(node_of.size()) < n; ++i) node_of.push_back(1000 - node);
    ++node;
    size = size % largest + 1;
  }
  return node_of;
}

NodeShape shape_of(std::vector<int> node_of, int leaders = 1, std::optional<AlgorithmChoice> inter = {},
                   std::size_t total = 0) {
  NodeShape s;
  s.node_of = std::move(node_of);
  s.leaders = leaders;
  s.inter = inter;
  s.total_bytes = total;
  return s;
}

NodeStageParams stage_of(int leaders, std::optional<AlgorithmChoice> inter = {}) {
  NodeStageParams p;
  p.leaders = leaders;
  p.inter = inter;
  return p;
}

std::vector<Schedule> plan_all(Algorithm a, const NodeShape& shape) {
  std::vector<Schedule> s;
  for (int r = 0; r < static_cast<int>(shape.node_of.size()); ++r)
    s.push_back(plan_node_algorithm(a, shape, r));
  return s;
}

std::string check(Algorithm a, const NodeShape& shape) {
  return validate(plan_all(a, shape), shape.node_of);
}

}  // namespace

TEST_CASE("shared_memory: valid on one node for N = 1..64 and large N", "[node]") {
  for (int n = 1; n <= 64; ++n) {
    INFO("N = " << n);
    CHECK(check(Algorithm::shared_memory, shape_of(std::vector<int>(static_cast<std::size_t>(n), 0))) == "");
  }
  for (int n : {100, 255, 1024}) {
    if (n > agx_test::max_ranks()) continue;
    INFO("N = " << n);
    CHECK(check(Algorithm::shared_memory, shape_of(std::vector<int>(static_cast<std::size_t>(n), 7))) == "");
  }
  CHECK_THROWS_AS(plan_node_algorithm(Algorithm::shared_memory, shape_of(blocked(4, 2)), 0), Error);
}

TEST_CASE("hierarchical: valid for equal, unequal and round-robin placements, 1-8 leaders", "[node]") {
  const AlgorithmChoice inters[] = {{Algorithm::direct, 0},    {Algorithm::ring, 0},
                                    {Algorithm::neighbor_exchange, 0},
                                    {Algorithm::recursive_doubling, 0},
                                    {Algorithm::bruck, 2},     {Algorithm::bruck, 4},
                                    {Algorithm::distance_halving, 0}};
  for (int n : {2, 3, 4, 5, 6, 7, 8, 12, 16, 17, 24, 31, 64}) {
    for (int shape_kind = 0; shape_kind < 4; ++shape_kind) {
      for (int leaders : {1, 2, 3, 4, 8}) {
        for (const AlgorithmChoice& inter : inters) {
          NodeShape shape;
          shape.node_of = shape_kind == 0   ? blocked(n, 2)
                          : shape_kind == 1 ? blocked(n, 4)
                          : shape_kind == 2 ? round_robin(n, std::max(2, n / 3))
                                            : unequal(n, 4);
          shape.leaders = leaders;
          shape.inter = inter;
          const int nnodes = Placement(shape.node_of).nodes();
          if (!planner_for(inter.id).unsupported_reason({nnodes, 0, inter.radix}).empty()) continue;
          INFO("N = " << n << ", placement " << shape_kind << ", " << leaders << " leaders, inter "
                      << to_string(inter));
          CHECK(check(Algorithm::hierarchical, shape) == "");
        }
      }
    }
  }
}

TEST_CASE("hierarchical: valid at scale (up to 1024 ranks) with the inter-node rule", "[node]") {
  for (auto [n, ppn] : {std::pair{256, 8}, {512, 16}, {1000, 7}, {1024, 8}, {1024, 32}}) {
    if (n > agx_test::max_ranks()) continue;
    for (int leaders : {1, 4, 8}) {
      for (std::size_t total : {std::size_t{1024}, std::size_t{1} << 24}) {  // both sides of the rule
        const NodeShape shape = shape_of(blocked(n, ppn), leaders, std::nullopt, total);
        INFO("N = " << n << ", ppn " << ppn << ", " << leaders << " leaders, " << total << " B");
        CHECK(check(Algorithm::hierarchical, shape) == "");
      }
    }
  }
  const int rr_n = std::min(1024, agx_test::max_ranks()) / 8 * 8;
  const NodeShape rr = shape_of(round_robin(rr_n, rr_n / 8), 8, std::nullopt, 1);
  CHECK(check(Algorithm::hierarchical, rr) == "");
}

TEST_CASE("hierarchical: one rank per node is the inter-node schedule, one node shared_memory", "[node]") {
  const NodeShape one_per_node = shape_of(blocked(8, 1), 1, AlgorithmChoice{Algorithm::ring, 0});
  const Schedule s = plan_node_algorithm(Algorithm::hierarchical, one_per_node, 3);
  CHECK(describe(s) == describe(planner_for(Algorithm::ring).plan({8, 3, 0})));
  CHECK_FALSE(uses_segment(s));
  const NodeShape one_node = shape_of(std::vector<int>(5, 0));
  CHECK(describe(plan_node_algorithm(Algorithm::hierarchical, one_node, 2)) ==
        describe(plan_node_algorithm(Algorithm::shared_memory, one_node, 2)));
  // Leaders are clamped to the smallest node.
  CHECK(hier_leaders(shape_of(unequal(10, 4), 8)) == 1);
  CHECK(hier_leaders(shape_of(blocked(12, 4), 8)) == 4);
}

TEST_CASE("node validator: broken node schedules are rejected", "[node]") {
  const NodeShape shape = shape_of(blocked(8, 4), 2, AlgorithmChoice{Algorithm::ring, 0});
  const std::vector<Schedule> good = plan_all(Algorithm::hierarchical, shape);
  REQUIRE(validate(good, shape.node_of) == "");

  SECTION("a rank that never puts its block") {
    auto s = good;
    s[1].rounds[0].node.clear();
    CHECK(validate(s, shape.node_of) != "");
  }
  SECTION("a get one round too early (before the leaders received it)") {
    auto s = good;
    auto& last = s[2].rounds.back().node;
    REQUIRE_FALSE(last.empty());
    s[2].rounds[1].node.push_back(last.back());
    last.clear();
    CHECK(validate(s, shape.node_of).find("before its node's segment holds it") != std::string::npos);
  }
  SECTION("a block put twice on one node") {
    auto s = good;
    s[1].rounds[0].node.push_back({NodeOp::Kind::put, {{1, 1}}});
    CHECK(validate(s, shape.node_of) != "");
  }
  SECTION("a leader receiving into its buffer what its peer sends from the segment is fine, "
          "but sending from a segment that lacks the block is not") {
    auto s = good;
    // Leader 0 of node 0 sends rank 5's block (node 1's) from its own segment.
    s[0].rounds[1].sends.push_back({4, {{5, 1}}, Place::segment});
    s[4].rounds[1].recvs.push_back({0, {{5, 1}}, Place::buffer});
    CHECK(validate(s, shape.node_of).find("does not hold in its node's segment") != std::string::npos);
  }
  SECTION("the wrong placement: the same schedules on other nodes") {
    CHECK(validate(good, blocked(8, 2)) != "");
  }
  SECTION("shared_memory without the get round") {
    const NodeShape one = shape_of(std::vector<int>(4, 0));
    auto s = plan_all(Algorithm::shared_memory, one);
    s[3].rounds.pop_back();
    CHECK(validate(s, one.node_of).find("ends without block") != std::string::npos);
  }
}

TEST_CASE("cost model: node algorithms are priced from their schedules", "[node][cost]") {
  const CostParams c;
  const std::size_t m = 1 << 20;
  // shared_memory on 4 ranks: round 0 puts M and copies the own block, round 1 gets 3·M.
  const Layout layout = Layout::uniform(4, m);
  // (Copies at the rate of a 4 MiB call: the receive buffer holds 4·M.)
  const double expect = 2 * c.node_sync_s + copy_s_per_byte_at(c, 4 * m) * static_cast<double>(m + m + 3 * m);
  CHECK(predict_algorithm(AlgorithmChoice{Algorithm::shared_memory, 0}, layout, Placement::single_node(4), c, false) ==
        Approx(expect));
  CHECK(predict_algorithm(AlgorithmChoice{Algorithm::shared_memory, 0}, layout, Placement(blocked(4, 2)), c, false) ==
        std::numeric_limits<double>::infinity());
  // hierarchical on 2 nodes of 4: the node's NIC carries the same bytes with 1 or 4
  // leaders (the model charges the NIC, not the process), so more leaders never cost more.
  const Layout big = Layout::uniform(8, 16 * m);
  const Placement two(blocked(8, 4));
  const double one_leader = predict_algorithm(AlgorithmChoice{Algorithm::hierarchical, 0}, big, two, c, false, stage_of(1));
  const double four_leaders = predict_algorithm(AlgorithmChoice{Algorithm::hierarchical, 0}, big, two, c, false, stage_of(4));
  CHECK(four_leaders <= one_leader * (1 + 1e-12));
  CHECK(four_leaders > 0);
  // And the inter-node algorithm that runs is the one priced.
  const double ring = predict_algorithm(AlgorithmChoice{Algorithm::hierarchical, 0}, big, two, c, false, stage_of(1, AlgorithmChoice{Algorithm::ring, 0}));
  const double direct = predict_algorithm(AlgorithmChoice{Algorithm::hierarchical, 0}, big, two, c, false, stage_of(1, AlgorithmChoice{Algorithm::direct, 0}));
  CHECK(ring == Approx(direct));  // two nodes: both are one exchange of the aggregates
}
