// shared_memory by single copy (NodeShape::single_copy, lib/core/planners/node_planner.cpp):
// each rank exposes its block where it lies and signals it, reads every other block
// straight from its owner's buffer, and releases its own block once every peer has read
// it. The validator proves it on one node up to 1024 ranks (also with every flag an
// operation of its own), rejects broken variants, and the cost model prices its reads at
// the node level's rate. No MPI.

#include <catch2/catch.hpp>

#include "core/cost_model.hpp"
#include "core/planner.hpp"
#include "core/validator.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test_limits.hpp"

using namespace agx;

namespace {

NodeShape one_node(int n) {
  NodeShape s;
  s.node_of.assign(static_cast<std::size_t>(n), 7);
  s.single_copy = true;
  return s;
}

std::vector<Schedule> plan_all(const NodeShape& shape) {
  std::vector<Schedule> s;
  for (int r = 0; r < static_cast<int>(shape.node_of.size()); ++r)
    s.push_back(plan_node_algorithm(Algorithm::shared_memory, shape, r));
  return s;
}

void drop(std::vector<NodeOp>& ops, NodeOp::Kind k) {
  ops.erase(std::remove_if(ops.begin(), ops.end(), [k](const NodeOp& o) { return o.kind == k; }), ops.end());
}

}  // namespace

TEST_CASE("shared_memory by single copy: expose, read, release; valid to 1024 ranks", "[node]") {
  const NodeShape three = one_node(3);
  CHECK(describe(plan_node_algorithm(Algorithm::shared_memory, three, 1)) ==
        "round 0: expose([1,2)) signal([1,2)) copy([1,2))\n"
        "round 1: wait([0,1) [2,3)) read([0,1) [2,3))\n"
        "round 2: release([1,2))\n");
  // The signal goes with its expose, the wait with its read; a release waits by itself.
  const Schedule s1 = plan_node_algorithm(Algorithm::shared_memory, three, 1);
  CHECK(flags_with_copies(s1));
  // hierarchical on one node is shared_memory's.
  CHECK(describe(plan_node_algorithm(Algorithm::hierarchical, three, 1)) == describe(s1));
  for (int n = 1; n <= 64; ++n) {
    INFO("N = " << n);
    const NodeShape shape = one_node(n);
    CHECK(validate(plan_all(shape), shape.node_of) == "");
    std::vector<Schedule> split = plan_all(shape);
    for (Schedule& one_rank : split) one_rank = split_flags(one_rank);  // (every flag a round of its own)
    CHECK(validate(split, shape.node_of) == "");
  }
  for (int n : {255, 1024}) {
    if (n > agx_test::max_ranks()) continue;
    INFO("N = " << n);
    const NodeShape shape = one_node(n);
    CHECK(validate(plan_all(shape), shape.node_of) == "");
  }
}

TEST_CASE("node validator: broken single-copy schedules are rejected", "[node]") {
  const NodeShape shape = one_node(4);
  const std::vector<Schedule> good = plan_all(shape);
  REQUIRE(validate(good, shape.node_of) == "");
  const auto rejects = [&](const std::vector<Schedule>& s) { return validate(s, shape.node_of); };
  SECTION("an expose never signalled: the waits for it find no signal") {
    auto s = good;
    drop(s[2].rounds[0].node, NodeOp::Kind::signal);
    CHECK_THAT(rejects(s), Catch::Contains("waits for block 2, which no rank of its node signalled"));
  }
  SECTION("a signal without the expose") {
    auto s = good;
    drop(s[2].rounds[0].node, NodeOp::Kind::expose);
    CHECK_THAT(rejects(s), Catch::Contains("round 0, rank 2: signals block 2, which it did not put"));
  }
  SECTION("a read without its wait") {
    auto s = good;
    drop(s[0].rounds[1].node, NodeOp::Kind::wait);
    CHECK_THAT(rejects(s), Catch::Contains("round 1, rank 0: reads block 1 without waiting for its flag"));
  }
  SECTION("a read in the round of the expose") {
    auto s = good;
    s[0].rounds[0].node.push_back({NodeOp::Kind::wait, {{1, 1}}});
    s[0].rounds[0].node.push_back({NodeOp::Kind::read, {{1, 1}}});
    CHECK_THAT(rejects(s), Catch::Contains("round 0, rank 0: waits for block 1, which no rank"));
  }
  SECTION("a read of a block nobody exposed") {
    auto s = good;
    drop(s[3].rounds[0].node, NodeOp::Kind::expose);
    drop(s[3].rounds[0].node, NodeOp::Kind::signal);
    drop(s[3].rounds[2].node, NodeOp::Kind::release);
    drop(s[0].rounds[1].node, NodeOp::Kind::wait);  // (the wait would fail first)
    CHECK_THAT(rejects(s), Catch::Contains("round 1, rank 0: reads block 3, which no rank of its node exposed"));
  }
  SECTION("a rank that exposes a block not its own") {
    auto s = good;
    s[1].rounds[0].node.push_back({NodeOp::Kind::expose, {{2, 1}}});
    CHECK_THAT(rejects(s), Catch::Contains("round 0, rank 1: exposes block 2, not its own"));
  }
  SECTION("an exposed block also put into the segment") {
    auto s = good;
    s[1].rounds[0].node.push_back({NodeOp::Kind::put, {{1, 1}}});
    CHECK_THAT(rejects(s), Catch::Contains("round 0, rank 1: puts block 1, which rank 1 exposed in its own buffer"));
  }
  SECTION("a rank that reads twice (its done flag would rise after the first read)") {
    auto s = good;
    NodeOp& read = s[0].rounds[1].node[1];
    REQUIRE(read.kind == NodeOp::Kind::read);
    read.blocks = {{1, 2}};
    s[0].rounds[2].node.push_back({NodeOp::Kind::read, {{3, 1}}});
    CHECK_THAT(rejects(s), Catch::Contains("round 2, rank 0: reads a second time"));
  }
  SECTION("a release in the round of the reads: the peers may still be reading") {
    auto s = good;
    s[2].rounds[1].node.push_back(s[2].rounds[2].node[0]);
    drop(s[2].rounds[2].node, NodeOp::Kind::release);
    CHECK_THAT(rejects(s), Catch::Contains("round 1, rank 2: releases block 2 before rank 0 has read it (it reads it in this round)"));
  }
  SECTION("a release before a peer that reads later") {
    auto s = good;
    for (Schedule& r : s) r.rounds.resize(4);
    s[3].rounds[3].node = s[3].rounds[1].node;  // rank 3 waits and reads a round late
    s[3].rounds[1].node.clear();
    CHECK_THAT(rejects(s), Catch::Contains("round 2, rank 0: releases block 0 before rank 3 has read it (by this round it has not)"));
  }
  SECTION("a release before the rank's own read: it would wait for its own done flag") {
    // Two ranks: r1 releases in round 2 and reads only in round 3, while r0 reads in
    // round 1 and releases in round 4 (every peer has read each block before its release).
    const NodeShape two = one_node(2);
    auto t = plan_all(two);
    for (Schedule& r : t) r.rounds.resize(5);
    t[0].rounds[4].node = t[0].rounds[2].node;  // r0's release in round 4
    t[0].rounds[2].node.clear();
    t[1].rounds[3].node = t[1].rounds[1].node;  // r1 waits and reads in round 3
    t[1].rounds[1].node.clear();
    CHECK_THAT(validate(t, two.node_of),
               Catch::Contains("round 2, rank 1: releases block 1 before its own read is over"));
  }
  SECTION("an exposed block never released: the caller's buffer is read after the call") {
    auto s = good;
    drop(s[1].rounds[2].node, NodeOp::Kind::release);
    CHECK_THAT(rejects(s), Catch::Contains("rank 1 exposes block 1 and never releases it"));
  }
  SECTION("a release of a block the rank did not expose") {
    auto s = good;
    s[1].rounds[2].node.push_back({NodeOp::Kind::release, {{2, 1}}});
    CHECK_THAT(rejects(s), Catch::Contains("round 2, rank 1: releases block 2, which it did not expose"));
  }
  SECTION("a get of an exposed block: the segment never holds it") {
    auto s = good;
    s[0].rounds[1].node.push_back({NodeOp::Kind::get, {{1, 1}}});
    CHECK_THAT(rejects(s), Catch::Contains("gets block 1 before its node's segment holds it"));
  }
}

TEST_CASE("cost model: a read costs its bytes at the node level's rate; shared_memory takes "
          "the faster of staged and single copy",
          "[node][cost]") {
  CostParams c;
  const std::size_t m = 1 << 20;
  const Layout layout = Layout::uniform(4, m);
  const Placement node = Placement::single_node(4);
  const AlgorithmChoice shm{Algorithm::shared_memory, 0};
  NodeStageParams single;
  single.single_copy = true;
  const double gamma = copy_s_per_byte_at(c, 4 * m);
  // Staged: M in plus the own copy, then 3·M out; two flag synchronizations.
  const double staged = 2 * c.node_sync_s + gamma * static_cast<double>(2 * m) + gamma * static_cast<double>(3 * m);
  CHECK(predict_algorithm(shm, layout, node, c, false) == Approx(staged));
  // Single copy: the own copy, then 3·M read at the node level's rate, then the release.
  const auto single_copy = [&] {
    return 3 * c.node_sync_s + gamma * static_cast<double>(m) + c.node.beta_s_per_byte * static_cast<double>(3 * m);
  };
  // A slow kernel copy: staging is the faster, and the price is staging's.
  c.node.beta_s_per_byte = 10 * gamma;
  CHECK(predict_algorithm(shm, layout, node, c, false, single) == Approx(staged));
  // A fast one: single copy's.
  c.node.beta_s_per_byte = gamma;
  REQUIRE(single_copy() < staged);
  CHECK(predict_algorithm(shm, layout, node, c, false, single) == Approx(single_copy()));
  // Across nodes shared_memory cannot serve; hierarchical keeps its staged schedule.
  const Placement two(std::vector<int>{0, 0, 1, 1});
  NodeStageParams plain;
  CHECK(predict_algorithm(AlgorithmChoice{Algorithm::hierarchical, 0}, layout, two, c, false, single) ==
        Approx(predict_algorithm(AlgorithmChoice{Algorithm::hierarchical, 0}, layout, two, c, false, plain)));
}

// CUDA IPC (NodeShape::device_ipc, lib/cuda/ipc.hpp): the single-copy schedule between
// device buffers, every node operation and the own copy device-level, the own block
// copied into the receive buffer a round before it is exposed there.
TEST_CASE("CUDA IPC: the single-copy schedule at the device level; valid to 1024 ranks", "[node][ipc]") {
  NodeShape three = one_node(3);
  three.single_copy = false;
  three.device_ipc = true;
  CHECK(describe(plan_node_algorithm(Algorithm::shared_memory, three, 1)) ==
        "round 0: copy~device([1,2))\n"
        "round 1: expose~device([1,2)) signal~device([1,2))\n"
        "round 2: wait~device([0,1) [2,3)) read~device([0,1) [2,3))\n"
        "round 3: release~device([1,2))\n");
  CHECK(flags_with_copies(plan_node_algorithm(Algorithm::shared_memory, three, 1)));
  // (From 2 ranks: lib/cuda takes IPC only then; one rank's schedule is the device copy
  // alone, which the validator cannot tell from a host schedule's misplaced copy.)
  for (int n : {2, 3, 4, 5, 8, 17, 64, 255, 1024}) {
    if (n > agx_test::max_ranks()) continue;
    INFO("N = " << n);
    NodeShape shape = one_node(n);
    shape.device_ipc = true;
    CHECK(validate(plan_all(shape), shape.node_of) == "");
    if (n > 64) continue;
    std::vector<Schedule> split = plan_all(shape);
    for (Schedule& one_rank : split) one_rank = split_flags(one_rank);
    CHECK(validate(split, shape.node_of) == "");
  }
}

TEST_CASE("node validator: broken CUDA IPC schedules are rejected", "[node][ipc]") {
  NodeShape shape = one_node(4);
  shape.device_ipc = true;
  const std::vector<Schedule> good = plan_all(shape);
  REQUIRE(validate(good, shape.node_of) == "");
  const auto rejects = [&](const std::vector<Schedule>& s) { return validate(s, shape.node_of); };
  SECTION("the own block exposed in the round of its copy: the event could precede the copy") {
    auto s = good;
    s[2].rounds[0].node = s[2].rounds[1].node;
    s[2].rounds[1].node.clear();
    CHECK_THAT(rejects(s), Catch::Contains("round 0, rank 2: exposes its receive buffer's own block before a round has copied it there"));
  }
  SECTION("a device-level put: the segment is host memory") {
    auto s = good;
    s[1].rounds[1].node.push_back({NodeOp::Kind::put, {{1, 1}}, Level::device});
    CHECK_THAT(rejects(s), Catch::Contains("round 1, rank 1: put marked device-level"));
  }
  SECTION("a node-level read beside device-level operations") {
    auto s = good;
    s[3].rounds[2].node[1].level = Level::node;
    CHECK_THAT(rejects(s), Catch::Contains("round 2, rank 3: read marked node-level beside device-level ones"));
  }
  SECTION("a host copy of the own block on a rank whose buffers are device memory") {
    auto s = good;
    s[0].rounds[0].copies[0].level = Level::node;
    CHECK_THAT(rejects(s), Catch::Contains("round 0, rank 0: marks its copy node-level, but its buffers are device memory"));
  }
  SECTION("a release before the peers' reads") {
    auto s = good;
    s[1].rounds[2].node.push_back(s[1].rounds[3].node[0]);
    s[1].rounds[3].node.clear();
    CHECK_THAT(rejects(s), Catch::Contains("round 2, rank 1: releases block 1 before rank 0 has read it"));
  }
}

TEST_CASE("cost model: CUDA IPC is priced from its schedule", "[node][ipc][cost]") {
  CostParams c;
  const std::size_t m = 1 << 20;
  const Layout layout = Layout::uniform(4, m);
  // The own copy on the device (α + M at device_copy_s_per_byte: the event the peers'
  // reads wait for is recorded after it), then three rounds of device_peer α and the
  // reads of 3·M at its β; in place no copy.
  const double rounds = 3 * c.device_peer.alpha_s + c.device_peer.beta_s_per_byte * static_cast<double>(3 * m);
  const double own = c.device.alpha_s + c.device_copy_s_per_byte * static_cast<double>(m);
  CHECK(predict_ipc(layout, Placement::single_node(4), c, false) == Approx(own + rounds));
  CHECK(predict_ipc(layout, Placement::single_node(4), c, true) == Approx(rounds));
  // Slower peer links, a longer call; across nodes no IPC.
  CostParams slow = c;
  slow.device_peer.beta_s_per_byte *= 10;
  CHECK(predict_ipc(layout, Placement::single_node(4), slow, false) >
        predict_ipc(layout, Placement::single_node(4), c, false));
  CHECK(std::isinf(predict_ipc(layout, Placement(std::vector<int>{0, 0, 1, 1}), c, false)));
}
