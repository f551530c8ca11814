// shared_memory and hierarchical on device buffers (stage_on_device of a node schedule,
// lib/cuda's StagedNodeCall): the own block goes to the host mirror in round 0, the put
// waits for it there, and each get's blocks go on to the device in the get's round. The
// validator proves the staged node schedules over the placements the host ones are proven
// on (every rank staged, or every other rank: host ranks in a device call), rejects broken
// variants, and the cost model prices the device copies. No MPI.

#include <catch2/catch.hpp>

#include "core/cost_model.hpp"
#include "core/planner.hpp"
#include "core/validator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "test_limits.hpp"
#include "test_placements.hpp"

using namespace agx;

namespace {

using agx_test::blocked;
using agx_test::round_robin;
using agx_test::unequal;

NodeShape shape_of(std::vector<int> node_of, int leaders = 1) {
  NodeShape s;
  s.node_of = std::move(node_of);
  s.leaders = leaders;
  return s;
}

// Every rank's schedule; `staged`: which ranks have device buffers (0: none, 1: all,
// 2: every other rank).
std::vector<Schedule> plan_all(Algorithm a, const NodeShape& shape, int staged) {
  std::vector<Schedule> s;
  for (int r = 0; r < static_cast<int>(shape.node_of.size()); ++r) {
    Schedule one = plan_node_algorithm(a, shape, r);
    if (staged == 1 || (staged == 2 && r % 2 == 0)) one = stage_on_device(one);
    s.push_back(std::move(one));
  }
  return s;
}

std::string check(Algorithm a, const NodeShape& shape, int staged) {
  return validate(plan_all(a, shape, staged), shape.node_of);
}

}  // namespace

TEST_CASE("shared_memory staged on device buffers: the text form", "[node][staged]") {
  const Schedule s = stage_on_device(plan_node_algorithm(Algorithm::shared_memory, shape_of({0, 0, 0}), 1));
  CHECK(is_staged(s));
  CHECK(describe(s) ==
        "round 0: put([1,2)) signal([1,2)) copy~device([1,2)) to_host([1,2))\n"
        "round 1: wait([0,1) [2,3)) get([0,1) [2,3)) to_device([0,1) [2,3))\n");
}

TEST_CASE("shared_memory staged: valid on one node to 1024 ranks, all or some ranks staged", "[node][staged]") {
  for (int n = 1; n <= 64; ++n) {
    INFO("N = " << n);
    const NodeShape shape = shape_of(std::vector<int>(static_cast<std::size_t>(n), 3));
    CHECK(check(Algorithm::shared_memory, shape, 1) == "");
    CHECK(check(Algorithm::shared_memory, shape, 2) == "");
    std::vector<Schedule> split = plan_all(Algorithm::shared_memory, shape, 0);
    for (Schedule& x : split) x = stage_on_device(split_flags(x));  // every flag a round of its own
    CHECK(validate(split, shape.node_of) == "");
  }
  for (int n : {255, 1024}) {
    if (n > agx_test::max_ranks()) continue;
    INFO("N = " << n);
    CHECK(check(Algorithm::shared_memory, shape_of(std::vector<int>(static_cast<std::size_t>(n), 0)), 1) == "");
  }
}

TEST_CASE("hierarchical staged: equal, unequal and round-robin placements, 1-8 leaders", "[node][staged]") {
  for (int n : {2, 3, 4, 5, 8, 12, 17, 31, 64}) {
    for (int kind = 0; kind < 4; ++kind) {
      for (int leaders : {1, 2, 4, 8}) {
        NodeShape shape = shape_of(kind == 0   ? blocked(n, 2)
                                   : kind == 1 ? blocked(n, 4)
                                   : kind == 2 ? round_robin(n, std::max(2, n / 3))
                                               : unequal(n, 4),
                                   leaders);
        INFO("N = " << n << ", placement " << kind << ", " << leaders << " leaders");
        CHECK(check(Algorithm::hierarchical, shape, 1) == "");
        CHECK(check(Algorithm::hierarchical, shape, 2) == "");
      }
    }
  }
  const int n = std::min(1024, agx_test::max_ranks());
  for (int leaders : {1, 4}) {
    INFO("N = " << n << ", 8 per node, " << leaders << " leaders");
    CHECK(check(Algorithm::hierarchical, shape_of(blocked(n, 8), leaders), 1) == "");
  }
}

TEST_CASE("staged node schedules: broken variants are rejected", "[node][staged]") {
  const NodeShape one = shape_of({0, 0, 0, 0});
  const auto one_node = plan_all(Algorithm::shared_memory, one, 1);
  REQUIRE(validate(one_node, one.node_of) == "");
  SECTION("a get's blocks never go to the device") {
    auto s = one_node;
    s[2].rounds[1].device.clear();
    CHECK_THAT(validate(s, one.node_of), Catch::Contains("rank 2 never copies block 0 to its device buffer"));
  }
  SECTION("the own block is put before it is on the host") {
    auto s = one_node;
    auto& d = s[1].rounds[0].device;
    d.erase(std::remove_if(d.begin(), d.end(), [](const DeviceCopy& c) { return c.kind == DeviceCopy::Kind::to_host; }),
            d.end());
    CHECK_THAT(validate(s, one.node_of), Catch::Contains("round 0, rank 1: puts its own block before copying it to the host"));
  }
  SECTION("part of a get goes to the device") {
    auto s = one_node;
    s[0].rounds[1].device.back().blocks = {{1, 1}};  // the get brings blocks 1-3
    CHECK_THAT(validate(s, one.node_of), Catch::Contains("round 1, rank 0: copies part of its get to the device"));
  }
  SECTION("single copy has no staged form") {
    NodeShape cma = one;
    cma.single_copy = true;
    const auto s = plan_all(Algorithm::shared_memory, cma, 1);
    CHECK_THAT(validate(s, cma.node_of), Catch::Contains("has device copies and a node-level expose"));
  }
  SECTION("a block received into the segment goes to the device in that round") {
    // Two nodes of two, one leader each: the leader receives the other node's blocks
    // into the segment; they reach its mirror only with its get of a later round.
    const NodeShape two = shape_of(blocked(4, 2));
    auto s = plan_all(Algorithm::hierarchical, two, 1);
    REQUIRE(validate(s, two.node_of) == "");
    bool found = false;
    for (std::size_t k = 0; k < s[0].rounds.size() && !found; ++k)
      for (const Transfer& t : s[0].rounds[k].recvs)
        if (t.place == Place::segment && !found) {
          s[0].rounds[k].device.push_back({DeviceCopy::Kind::to_device, t.blocks});
          found = true;
        }
    REQUIRE(found);
    // (The block is in the leader's segment, not in its buffer: it does not hold it yet.)
    CHECK_THAT(validate(s, two.node_of), Catch::Contains("to the device before it holds it"));
  }
}

TEST_CASE("cost model: a staged node schedule pays its device copies", "[node][staged][cost]") {
  CostParams c;
  const std::size_t m = 1 << 20;
  const Layout layout = Layout::uniform(4, m);
  const Placement node = Placement::single_node(4);
  const AlgorithmChoice shm{Algorithm::shared_memory, 0};
  // In place (no own copy on either side: out of place, the staged one makes it on the
  // device, not on the host).
  const double host = predict_algorithm(shm, layout, node, c, true);
  const double staged = predict_staged(shm, layout, node, c, true);
  // Round 0's put waits for the whole own block on the mirror (α_d + β_d·M before it);
  // round 1's gets bring 3·M, which follow to the device (at least its last chunk after
  // the round; the copies of the blocks pipeline with the gets).
  const double to_host = c.device.alpha_s + c.device.beta_s_per_byte * static_cast<double>(m);
  CHECK(staged >= host + to_host);
  CHECK(staged >= host + to_host + c.device.alpha_s);
  CHECK(std::isfinite(staged));
  // Across nodes shared_memory cannot serve; hierarchical can, and pays its copies too.
  const Placement two(blocked(4, 2));
  CHECK(predict_staged(shm, layout, two, c, false) == std::numeric_limits<double>::infinity());
  const AlgorithmChoice hier{Algorithm::hierarchical, 0};
  CHECK(predict_staged(hier, layout, two, c, false) > predict_algorithm(hier, layout, two, c, false));
  // Dearer device copies make the staged schedule dearer, the host one stays.
  CostParams slow = c;
  slow.device.beta_s_per_byte *= 4;
  CHECK(predict_staged(shm, layout, node, slow, true) > staged);
  CHECK(predict_algorithm(shm, layout, node, slow, true) == Approx(host));
}
