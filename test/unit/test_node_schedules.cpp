// shared_memory and hierarchical as schedules (lib/core/planners/node_planner.cpp), proven by the
// validator over placements up to 1024 ranks (equal and unequal ranks per node, nodes of
// 1 to 200 ranks, round-robin, 1-8 leaders), cut into the same messages on both sides
// under any block sizes (zeros included), and broken variants rejected. No MPI.
// AGX_TEST_MAX_RANKS (test_limits.hpp) scales the largest placements down.

#include <catch2/catch.hpp>

#include <agx/error.hpp>

#include "core/cost_model.hpp"
#include "core/planner.hpp"
#include "core/validator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "test_layouts.hpp"
#include "test_limits.hpp"
#include "test_placements.hpp"

using namespace agx;

namespace {

using agx_test::blocked;
using agx_test::round_robin;
using agx_test::unequal;

// Consecutive nodes whose sizes cycle through `sizes` (the last node takes what is left).
std::vector<int> mixed(int n, const std::vector<int>& sizes) {
  std::vector<int> node_of;
  for (std::size_t node = 0; static_cast<int>(node_of.size()) < n; ++node)
    for (int i = 0; i < sizes[node % sizes.size()] && static_cast<int>(node_of.size()) < n; ++i)
      node_of.push_back(static_cast<int>(node));
  return node_of;
}

// The same nodes with their ranks scattered: each node's size stays, its members are
// no longer consecutive, and node ids no longer follow the lowest rank.
std::vector<int> scattered(std::vector<int> node_of, unsigned seed) {
  std::mt19937 rng(seed);
  std::shuffle(node_of.begin(), node_of.end(), rng);
  for (int& j : node_of) j = 5000 - j;
  return node_of;
}

// The largest rank count the scale tests use (1024, or AGX_TEST_MAX_RANKS).
int scale_ranks() { return std::min(1024, agx_test::max_ranks()); }

std::size_t smallest_node(const std::vector<int>& node_of) {
  std::map<int, std::size_t> sizes;
  for (int j : node_of) ++sizes[j];
  std::size_t smallest = node_of.size();
  for (const auto& [j, size] : sizes) smallest = std::min(smallest, size);
  return smallest;
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

// Removes the operations of kind k from a round's node operations.
void drop(std::vector<NodeOp>& ops, NodeOp::Kind k) {
  ops.erase(std::remove_if(ops.begin(), ops.end(), [k](const NodeOp& o) { return o.kind == k; }), ops.end());
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
          // Every flag an operation of its own (split_flags, AGX_TEST_SPLIT_FLAGS): still valid.
          std::vector<Schedule> all = plan_all(Algorithm::hierarchical, shape);
          for (Schedule& x : all) x = split_flags(x);
          CHECK(validate(all, shape.node_of) == "");
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
}

TEST_CASE("hierarchical: unequal ranks per node at scale (nodes of 1 to 200 ranks)", "[node]") {
  const int n = scale_ranks();
  struct Case {
    const char* name;
    std::vector<int> node_of;
  };
  const Case cases[] = {
      {"nodes of 1, 7, 64, 200 ranks in turn", mixed(n, {1, 7, 64, 200})},
      {"the same, ranks scattered over the nodes", scattered(mixed(n, {1, 7, 64, 200}), 1)},
      {"nodes of 8, 13, 64, 200, 9 ranks in turn", mixed(n, {8, 13, 64, 200, 9})},
      {"the same, ranks scattered over the nodes", scattered(mixed(n, {8, 13, 64, 200, 9}), 2)},
      {"one large node and nodes of 1 rank", mixed(n, {std::max(1, n - 23), 1})},
  };
  for (const Case& c : cases) {
    for (int leaders : {1, 2, 4, 8}) {
      // Leaders are clamped to the smallest node: no use proving the same schedule twice.
      if (leaders > 1 && static_cast<std::size_t>(leaders) > smallest_node(c.node_of)) continue;
      for (std::size_t total : {std::size_t{1024}, std::size_t{1} << 24}) {  // both sides of the rule
        const NodeShape shape = shape_of(c.node_of, leaders, std::nullopt, total);
        INFO("N = " << n << ", " << c.name << " (" << Placement(shape.node_of).nodes() << " nodes), "
                    << leaders << " leaders, " << total << " B");
        REQUIRE(hier_leaders(shape) == leaders);
        CHECK(check(Algorithm::hierarchical, shape) == "");
      }
    }
  }
  // Every inter-node algorithm between unequal nodes, 4 leaders each carrying a slice.
  for (const AlgorithmChoice& inter : {AlgorithmChoice{Algorithm::direct, 0}, AlgorithmChoice{Algorithm::ring, 0},
                                       AlgorithmChoice{Algorithm::neighbor_exchange, 0},
                                       AlgorithmChoice{Algorithm::recursive_doubling, 0},
                                       AlgorithmChoice{Algorithm::bruck, 4},
                                       AlgorithmChoice{Algorithm::distance_halving, 0}}) {
    const NodeShape shape = shape_of(cases[3].node_of, 4, inter);
    INFO("N = " << n << ", " << cases[3].name << ", inter " << to_string(inter));
    CHECK(check(Algorithm::hierarchical, shape) == "");
  }
}

TEST_CASE("hierarchical: round-robin at scale with 1, 2, 4 and 8 leaders", "[node]") {
  const int n = scale_ranks();
  // n/8 nodes of 8 ranks each; n/10 nodes of 10 or 11 ranks (unequal, interleaved).
  // Each leader count once, each side of the inter-node rule twice (small: recursive
  // doubling or Bruck; large: neighbour exchange or ring).
  const std::pair<int, std::size_t> runs[] = {{1, 1}, {2, std::size_t{1} << 24}, {4, 1}, {8, std::size_t{1} << 24}};
  for (int nodes : {n / 8, n / 10}) {
    if (nodes < 2) continue;
    for (const auto& [leaders, total] : runs) {
      const NodeShape shape = shape_of(round_robin(n, nodes), leaders, std::nullopt, total);
      INFO("N = " << n << ", round-robin over " << nodes << " nodes, " << leaders << " leaders, "
                  << total << " B");
      REQUIRE(hier_leaders(shape) == leaders);
      CHECK(check(Algorithm::hierarchical, shape) == "");
    }
  }
}

// The byte level (validate_messages, as test_schedules.cpp runs it for the point-to-point
// planners): the leaders' transfers from and into the segment cut the same messages on
// both sides whatever the block sizes, zero-size blocks and all-zero calls included, and
// a zero-byte transfer sends nothing. (The segment holds each block at the same size as
// the layout, so the layout's sizes are the segment's.)
TEST_CASE("node schedules cut the same messages on both sides for any block sizes", "[node][validator]") {
  struct Case {
    Algorithm a;
    NodeShape shape;
  };
  std::vector<Case> cases;
  for (int n : {1, 2, 3, 5, 8, 13, 33, 64, 100}) {
    cases.push_back({Algorithm::shared_memory, shape_of(std::vector<int>(static_cast<std::size_t>(n), 0))});
    if (n < 3) continue;
    for (int leaders : {1, 2, 4}) {
      cases.push_back({Algorithm::hierarchical, shape_of(blocked(n, 4), leaders)});
      cases.push_back({Algorithm::hierarchical, shape_of(round_robin(n, std::max(2, n / 3)), leaders)});
      cases.push_back({Algorithm::hierarchical, shape_of(unequal(n, 4), leaders, AlgorithmChoice{Algorithm::ring, 0})});
    }
  }
  const int n = std::max(64, scale_ranks());
  cases.push_back({Algorithm::hierarchical, shape_of(scattered(mixed(n, {8, 13, 64, 200, 9}), 3), 4)});
  cases.push_back({Algorithm::hierarchical, shape_of(round_robin(n, n / 10), 8, std::nullopt, std::size_t{1} << 24)});
  for (const Case& c : cases) {
    const int ranks = static_cast<int>(c.shape.node_of.size());
    const std::vector<Schedule> schedules = plan_all(c.a, c.shape);
    REQUIRE(validate(schedules, c.shape.node_of) == "");
    for (int pattern = 0; pattern < agx_test::size_patterns; ++pattern) {
      const auto bytes = agx_test::sizes_for(ranks, pattern);
      const auto offsets = agx_test::reversed_offsets(bytes);
      const Layout layout = Layout::varying(bytes, offsets);  // (non-owning)
      for (std::size_t max_bytes : {std::size_t{7}, std::size_t{64}, std::size_t{1} << 30}) {
        INFO(to_string(c.a) << " N=" << ranks << " on " << Placement(c.shape.node_of).nodes() << " nodes, "
                            << c.shape.leaders << " leaders, pattern " << pattern << ", max " << max_bytes);
        REQUIRE(validate_messages(schedules, layout, max_bytes) == "");
      }
    }
  }
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

TEST_CASE("shared_memory in text: put and signal, then wait and get", "[node]") {
  CHECK(describe(plan_node_algorithm(Algorithm::shared_memory, shape_of(std::vector<int>(3, 0)), 1)) ==
        "round 0: put([1,2)) signal([1,2)) copy([1,2))\n"
        "round 1: wait([0,1) [2,3)) get([0,1) [2,3))\n");
  // A wait in the round of the signal it waits for is refused: signals count from the
  // next round (so every wait is for an earlier round, and no schedule that passes
  // can deadlock).
  CHECK(describe(split_flags(plan_node_algorithm(Algorithm::shared_memory, shape_of(std::vector<int>(3, 0)), 1))) ==
        "round 0: put([1,2)) copy([1,2))\nround 1: signal([1,2))\nround 2:\nround 3:\n"
        "round 4:\nround 5:\nround 6: wait([0,1) [2,3))\nround 7: get([0,1) [2,3))\n");
  CHECK(flags_with_copies(plan_node_algorithm(Algorithm::shared_memory, shape_of(std::vector<int>(3, 0)), 1)));
  CHECK_FALSE(flags_with_copies(split_flags(plan_node_algorithm(Algorithm::shared_memory, shape_of(std::vector<int>(3, 0)), 1))));
  std::vector<Schedule> s;
  for (int r = 0; r < 3; ++r) s.push_back(plan_node_algorithm(Algorithm::shared_memory, shape_of(std::vector<int>(3, 0)), r));
  s[0].rounds[0].node.push_back({NodeOp::Kind::wait, {{1, 1}}});
  CHECK_THAT(validate(s), Catch::Contains("round 0, rank 0: waits for block 1, which no rank of its node signalled in an earlier round"));
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
  // Flags (core/schedule.hpp, NodeOp): signal and wait are operations of their own.
  SECTION("a put never signalled: the waits for it find no signal") {
    auto s = good;
    drop(s[1].rounds[0].node, NodeOp::Kind::signal);
    CHECK_THAT(validate(s, shape.node_of),
               Catch::Contains("waits for block 1, which no rank of its node signalled in an earlier round"));
  }
  SECTION("a get without its wait") {
    auto s = good;
    drop(s[2].rounds[1].node, NodeOp::Kind::wait);
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("round 1, rank 2: gets block 0 without waiting for its flag"));
  }
  SECTION("a leader's send from the segment of a block another rank put, without its wait") {
    auto s = good;  // leader 0 of node 0 (ranks 0-3, 2 leaders) sends slice 0: blocks 0 and 1
    drop(s[0].rounds[1].node, NodeOp::Kind::wait);
    CHECK_THAT(validate(s, shape.node_of),
               Catch::Contains("round 1, rank 0: sends block 1 from the segment without waiting for its flag"));
  }
  SECTION("a leader that never signals what it received") {
    auto s = good;
    std::size_t dropped = 0;
    for (Round& r : s[4].rounds) {  // rank 4: leader 0 of node 1; its signal of node 0's blocks
      auto& ops = r.node;
      const auto n = ops.size();
      ops.erase(std::remove_if(ops.begin(), ops.end(),
                               [](const NodeOp& o) { return o.kind == NodeOp::Kind::signal && o.blocks[0].first != 4; }),
                ops.end());
      dropped += n - ops.size();
    }
    REQUIRE(dropped == 1);
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("which no rank of its node signalled in an earlier round"));
  }
  SECTION("a rank signals a block another rank put") {
    auto s = good;
    s[1].rounds[0].node.push_back({NodeOp::Kind::signal, {{0, 1}}});
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("signals block 0, which it did not put or receive"));
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
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("does not hold in its node's segment"));
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

TEST_CASE("node validator: broken node schedules at scale are rejected", "[node]") {
  // Unequal nodes with scattered ranks, 4 leaders each carrying a slice, ring between the
  // nodes (so that what a leader receives into the segment is sent on the next round).
  // At least 64 ranks (3 nodes, what every test proves uncapped) under AGX_TEST_MAX_RANKS.
  static const NodeShape shape = shape_of(scattered(mixed(std::max(64, scale_ranks()), {8, 13, 64, 200, 9}), 2), 4,
                                          AlgorithmChoice{Algorithm::ring, 0});
  static const std::vector<Schedule> good = [] {
    auto s = plan_all(Algorithm::hierarchical, shape);
    REQUIRE(validate(s, shape.node_of) == "");
    return s;
  }();
  REQUIRE(Placement(shape.node_of).nodes() >= 3);
  const int n = static_cast<int>(shape.node_of.size());
  // The first rank whose round 1 sends from the segment: a leader.
  int leader = 0;
  while (leader < n && (good[leader].rounds.size() < 2 || good[leader].rounds[1].sends.empty())) ++leader;
  REQUIRE(leader < n);
  const Transfer& first_send = good[leader].rounds[1].sends.front();
  REQUIRE(first_send.place == Place::segment);
  const int peer = first_send.peer;
  auto matching_recv = [&](const std::vector<Schedule>& s, int at) {
    const auto& recvs = s[at].rounds[1].recvs;
    return std::find_if(recvs.begin(), recvs.end(), [&](const Transfer& r) { return r.peer == leader; }) - recvs.begin();
  };

  SECTION("a leader that skips one receive of the inter-node schedule") {
    auto s = good;
    auto& recvs = s[peer].rounds[1].recvs;
    recvs.erase(recvs.begin() + matching_recv(s, peer));
    CHECK(validate(s, shape.node_of).find("is never received") != std::string::npos);
  }
  SECTION("a slice received into the leader's buffer instead of the segment") {
    auto s = good;
    s[peer].rounds[1].recvs[static_cast<std::size_t>(matching_recv(s, peer))].place = Place::buffer;
    // (As is, its signal of the slice at the round's end is what fails first.)
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("signals block"));
    drop(s[peer].rounds[1].node, NodeOp::Kind::signal);  // then the send of it on
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("does not hold in its node's segment"));
  }
  SECTION("a slice sent to another leader of the peer node, which the right leader then sends on") {
    // Leader l' of the peer node receives slice l; leader l, which forwards slice l in
    // round 2, never received it: no flag tells it when the slice is there.
    int other = -1;
    for (int r = 0; r < n && other < 0; ++r)
      if (r != peer && shape.node_of[r] == shape.node_of[peer] && !good[r].rounds[1].recvs.empty()) other = r;
    REQUIRE(other >= 0);
    auto s = good;
    auto& from = s[peer].rounds[1].recvs;
    const auto at = from.begin() + matching_recv(s, peer);
    s[other].rounds[1].recvs.push_back(*at);
    // The signal of the slice at the round's end moves with it (one receive per round
    // in a ring: the whole signal).
    auto& signals = s[peer].rounds[1].node;
    const auto sig = std::find_if(signals.begin(), signals.end(), [](const NodeOp& o) { return o.kind == NodeOp::Kind::signal; });
    REQUIRE(sig != signals.end());
    REQUIRE(block_count(sig->blocks) == block_count(at->blocks));
    s[other].rounds[1].node.push_back(*sig);
    signals.erase(sig);
    from.erase(at);
    s[leader].rounds[1].sends.front().peer = other;
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("received there"));
  }
  SECTION("a last get that misses one block of another node") {
    auto s = good;
    auto& spans = s[n / 2].rounds.back().node.back().blocks;
    REQUIRE_FALSE(spans.empty());
    if (--spans.back().count == 0) spans.pop_back();
    CHECK(validate(s, shape.node_of).find("ends without block") != std::string::npos);
  }
  SECTION("a rank that puts a block it does not hold") {
    auto s = good;
    s[n - 1].rounds[0].node.front().blocks = {{0, 1}};
    CHECK(validate(s, shape.node_of).find("it does not hold") != std::string::npos);
  }
  SECTION("the schedules of another placement (the same nodes, ranks not scattered)") {
    CHECK(validate(good, mixed(n, {8, 13, 64, 200, 9})) != "");
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
  // Zero-size blocks: some, or all (a call of no bytes still synchronizes its node).
  for (int pattern : {1, 2, 3}) {
    const auto bytes = agx_test::sizes_for(8, pattern);
    const auto offsets = agx_test::reversed_offsets(bytes);
    const Layout zeros = Layout::varying(bytes, offsets);
    for (Algorithm a : {Algorithm::shared_memory, Algorithm::hierarchical}) {
      const Placement where = a == Algorithm::shared_memory ? Placement::single_node(8) : two;
      const double t = predict_algorithm(AlgorithmChoice{a, 0}, zeros, where, c, false, stage_of(2));
      INFO(to_string(a) << ", pattern " << pattern);
      CHECK(std::isfinite(t));
      CHECK(t > 0);
      CHECK(t <= predict_algorithm(AlgorithmChoice{a, 0}, big, where, c, false, stage_of(2)));
    }
  }
}

TEST_CASE("levels: every operation is marked with its level, checked against the placement",
          "[node][validator]") {
  // A planner of messages plans without a placement (every transfer network-level);
  // place_levels marks them from one; node planners mark their own.
  const std::vector<int> two_by_two = blocked(4, 2);  // {0, 1} {2, 3}
  std::vector<Schedule> ring;
  for (int r = 0; r < 4; ++r) ring.push_back(planner_for(Algorithm::ring).plan({4, r, 0}));
  for (const Schedule& s : ring)
    for (const Round& round : s.rounds)
      for (const Transfer& t : round.sends) CHECK(t.level == Level::network);
  CHECK(validate(ring, {}) == "");  // no placement: marks not checked
  const std::string unplaced = validate(ring, two_by_two);
  CHECK(unplaced.find("network-level, but the two are on one node") != std::string::npos);
  for (Schedule& s : ring) place_levels(s, two_by_two);
  CHECK(validate(ring, two_by_two) == "");
  // Ring 0 -> 1 -> 2 -> 3 -> 0: rank 1 sends to 2 across nodes, rank 0 to 1 inside its node.
  CHECK(ring[0].rounds[0].sends[0].level == Level::node);
  CHECK(ring[1].rounds[0].sends[0].level == Level::network);
  CHECK(describe(ring[0]).find("send~node(1:") != std::string::npos);
  // Marked for one placement, wrong for another.
  CHECK(validate(ring, blocked(4, 1)).find("node-level, but the two are on different nodes") !=
        std::string::npos);

  // hierarchical marks its leaders' exchange network-level and its puts and gets node-level,
  // on every placement the scale tests use (the validator checks each mark).
  for (const auto& node_of : {blocked(64, 8), round_robin(64, 4), unequal(64, 7)}) {
    const NodeShape shape = shape_of(node_of, 2);
    const auto plans = plan_all(Algorithm::hierarchical, shape);
    REQUIRE(validate(plans, node_of) == "");
    auto broken = plans;
    bool marked = false;
    for (Round& round : broken[0].rounds)
      for (Transfer& t : round.sends) t.level = Level::node, marked = true;
    REQUIRE(marked);  // rank 0 leads its node
    CHECK(validate(broken, node_of).find("node-level, but the two are on different nodes") !=
          std::string::npos);
    broken = plans;
    broken[1].rounds[0].node[0].level = Level::network;
    CHECK(validate(broken, node_of).find("put marked network-level") != std::string::npos);
  }
}

TEST_CASE("cost model: messages are priced on the level they are marked with", "[node][cost]") {
  // Direct on 4 ranks, 2 per node: each rank's one round has a message inside its node
  // and two across. With the node level much dearer than the network, the round costs
  // the node level's time, which the cost model knows only from the marks it places.
  CostParams c;
  c.node = LevelCost{50e-6, 0, 0, 0, 0};
  c.network = LevelCost{1e-6, 0, 0, 0, 0};
  c.node_sync_s = 0;
  const Layout layout = Layout::uniform(4, 8);
  CHECK(predict_seconds(planner_for(Algorithm::direct), layout, Placement(blocked(4, 2)), c, true) ==
        Approx(50e-6));
  CHECK(predict_seconds(planner_for(Algorithm::direct), layout, Placement(blocked(4, 1)), c, true) ==
        Approx(1e-6));
}

TEST_CASE("copies: every schedule copies its own block once, and the validator requires it",
          "[node][validator]") {
  // Planner::plan adds the own block's copy to round 0 of every planner's schedule.
  for (const Planner* p : all_planners())
    for (int n : {1, 2, 5}) {
      if (!p->unsupported_reason({n, 0, 0}).empty()) continue;
      for (int r = 0; r < n; ++r) {
        const Schedule s = p->plan({n, r, 0});
        INFO(to_string(p->id()) << " N=" << n << " rank " << r);
        REQUIRE_FALSE(s.rounds.empty());
        REQUIRE(s.rounds[0].copies.size() == 1);
        CHECK(s.rounds[0].copies[0].blocks == std::vector<BlockSpan>{{r, 1}});
        CHECK(s.rounds[0].copies[0].level == Level::node);
      }
    }
  CHECK(describe(planner_for(Algorithm::ring).plan({1, 0, 0})) == "round 0: copy([0,1))\n");
  for (Algorithm a : {Algorithm::shared_memory, Algorithm::hierarchical})
    for (const auto& node_of : {std::vector<int>{0}, std::vector<int>(4, 0), blocked(6, 2)}) {
      if (a == Algorithm::shared_memory && node_of.size() == 6) continue;
      const auto plans = plan_all(a, shape_of(node_of));
      for (const Schedule& s : plans) {
        REQUIRE(s.rounds[0].copies.size() == 1);
        CHECK(s.rounds[0].copies[0].blocks == std::vector<BlockSpan>{{s.rank, 1}});
      }
    }

  std::vector<Schedule> ring;
  for (int r = 0; r < 4; ++r) ring.push_back(planner_for(Algorithm::ring).plan({4, r, 0}));
  REQUIRE(validate(ring) == "");
  auto s = ring;
  s[2].rounds[0].copies.clear();
  CHECK(validate(s) == "rank 2 never copies its own block into its receive buffer");
  s = ring;
  s[2].rounds[0].copies[0].blocks = {{1, 1}};
  CHECK(validate(s).find("copies block 1, not its own") != std::string::npos);
  s = ring;
  s[2].rounds[1].copies.push_back({{{2, 1}}});
  CHECK(validate(s).find("round 1, rank 2: copies its own block twice") != std::string::npos);
  s = ring;
  s[2].rounds[0].copies[0].level = Level::network;
  CHECK(validate(s).find("marks its copy network-level") != std::string::npos);
}

TEST_CASE("cost model: a schedule's copies are priced out of place, free in place", "[node][cost]") {
  const CostParams c;
  const std::size_t m = 1 << 20;
  const Layout one = Layout::uniform(1, m);
  // One rank: the schedule is its copy alone.
  CHECK(predict_seconds(planner_for(Algorithm::ring), one, Placement::single_node(1), c, false) ==
        Approx(copy_s_per_byte_at(c, m) * static_cast<double>(m)));
  CHECK(predict_seconds(planner_for(Algorithm::ring), one, Placement::single_node(1), c, true) == 0);
}

// shared_memory by direct write (NodeShape::direct_write): each rank writes its block
// straight into its peers' receive buffers and signals it; the peers' waits deliver it.
TEST_CASE("shared_memory by direct write: write and signal, then wait; valid to 1024 ranks", "[node]") {
  NodeShape one = shape_of(std::vector<int>(3, 0));
  one.direct_write = true;
  CHECK(describe(plan_node_algorithm(Algorithm::shared_memory, one, 1)) ==
        "round 0: write([1,2)) signal([1,2)) copy([1,2))\n"
        "round 1: wait([0,1) [2,3))\n");
  // The signal goes with its write; the wait has no get (the writes deliver the blocks).
  const Schedule s1 = plan_node_algorithm(Algorithm::shared_memory, one, 1);
  CHECK(paired(s1.rounds[0], s1.rounds[0].node[1]));
  CHECK_FALSE(flags_with_copies(s1));
  for (int n = 1; n <= 64; ++n) {
    INFO("N = " << n);
    NodeShape shape = shape_of(std::vector<int>(static_cast<std::size_t>(n), 3));
    shape.direct_write = true;
    CHECK(check(Algorithm::shared_memory, shape) == "");
    std::vector<Schedule> split = plan_all(Algorithm::shared_memory, shape);
    for (Schedule& one_rank : split) one_rank = split_flags(one_rank);  // (the signal a round of its own)
    CHECK(validate(split, shape.node_of) == "");
  }
  for (int n : {255, 1024}) {
    if (n > agx_test::max_ranks()) continue;
    INFO("N = " << n);
    NodeShape shape = shape_of(std::vector<int>(static_cast<std::size_t>(n), 0));
    shape.direct_write = true;
    CHECK(check(Algorithm::shared_memory, shape) == "");
    CHECK(check(Algorithm::hierarchical, shape) == "");  // (one node: shared_memory's)
  }
}

TEST_CASE("node validator: broken direct-write schedules are rejected", "[node]") {
  NodeShape shape = shape_of(std::vector<int>(4, 0));
  shape.direct_write = true;
  const std::vector<Schedule> good = plan_all(Algorithm::shared_memory, shape);
  REQUIRE(validate(good, shape.node_of) == "");
  SECTION("a write never signalled: the waits for it find no signal") {
    auto s = good;
    drop(s[2].rounds[0].node, NodeOp::Kind::signal);
    CHECK_THAT(validate(s, shape.node_of),
               Catch::Contains("waits for block 2, which no rank of its node signalled in an earlier round"));
  }
  SECTION("a signal without the write: the block never reaches the peers") {
    auto s = good;
    drop(s[2].rounds[0].node, NodeOp::Kind::write);
    CHECK_THAT(validate(s, shape.node_of),
               Catch::Contains("round 0, rank 2: signals block 2, which it did not put or receive"));
  }
  SECTION("a rank that does not wait for a written block ends without it") {
    auto s = good;
    s[0].rounds[1].node[0].blocks = {{1, 2}};  // waits for 1 and 2, not 3
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("rank 0 ends without block 3"));
  }
  SECTION("a wait in the round of the write") {
    auto s = good;
    s[0].rounds[0].node.push_back({NodeOp::Kind::wait, {{1, 1}}});
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("round 0, rank 0: waits for block 1, which no rank"));
  }
  SECTION("a block written twice on one node") {
    auto s = good;
    s[1].rounds[0].node.push_back({NodeOp::Kind::write, {{1, 1}}});
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("round 0, rank 1: writes block 1, which rank 1 already placed"));
  }
  SECTION("a write of a block the rank does not hold") {
    auto s = good;
    s[1].rounds[0].node.push_back({NodeOp::Kind::write, {{2, 1}}});
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("round 0, rank 1: writes block 2 it does not hold"));
  }
  SECTION("a written block also put into the segment") {
    auto s = good;
    s[1].rounds[0].node.push_back({NodeOp::Kind::put, {{1, 1}}});
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("round 0, rank 1: puts block 1, which rank 1 wrote"));
  }
  SECTION("a written block also received as a message: twice") {
    auto s = good;
    s[1].rounds[0].sends.push_back({0, {{1, 1}}, Place::buffer, Level::node});
    s[0].rounds[0].recvs.push_back({1, {{1, 1}}, Place::buffer, Level::node});
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("receives block 1 twice"));
  }
  SECTION("a written block also received into the segment") {
    auto s = good;
    s[1].rounds[0].sends.push_back({0, {{1, 1}}, Place::buffer, Level::node});
    s[0].rounds[0].recvs.push_back({1, {{1, 1}}, Place::segment, Level::node});
    CHECK_THAT(validate(s, shape.node_of),
               Catch::Contains("round 0, rank 0: receives block 1 into its node's segment, which rank 1 wrote"));
  }
  SECTION("a get of a written block: the segment never holds it") {
    auto s = good;
    s[0].rounds[1].node.push_back({NodeOp::Kind::get, {{1, 1}}});
    CHECK_THAT(validate(s, shape.node_of), Catch::Contains("gets block 1 before its node's segment holds it"));
  }
}

TEST_CASE("cost model: direct write is priced as N-1 copies of the own block, no get", "[node][cost]") {
  const CostParams c;
  const std::size_t m = 1 << 20;
  const Layout layout = Layout::uniform(4, m);
  NodeStageParams direct;
  direct.direct_write = true;
  // Round 0 writes 3·M to the peers and copies the own block, round 1 only waits: the
  // copy bound's N·M bytes, against staging's M + M + 3·M.
  const double gamma = copy_s_per_byte_at(c, 4 * m);
  CHECK(predict_algorithm(AlgorithmChoice{Algorithm::shared_memory, 0}, layout, Placement::single_node(4), c,
                          false, direct) == Approx(2 * c.node_sync_s + gamma * static_cast<double>(3 * m + m)));
  CHECK(predict_algorithm(AlgorithmChoice{Algorithm::shared_memory, 0}, layout, Placement::single_node(4), c,
                          false, direct) <
        predict_algorithm(AlgorithmChoice{Algorithm::shared_memory, 0}, layout, Placement::single_node(4), c, false));
  // In place: the writes only.
  CHECK(predict_algorithm(AlgorithmChoice{Algorithm::shared_memory, 0}, layout, Placement::single_node(4), c,
                          true, direct) == Approx(2 * c.node_sync_s + c.copy_s_per_byte * static_cast<double>(3 * m)));
}
