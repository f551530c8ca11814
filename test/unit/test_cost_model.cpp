// The cost model reads schedules: its predictions must agree with the documented
// round/byte counts and order algorithms the way the α-β model says they should.

#include <catch2/catch.hpp>

#include "core/cost_model.hpp"

using namespace agx;

namespace {

Placement blocks_of(int nodes, int per_node) {
  std::vector<int> node_of;
  for (int i = 0; i < nodes * per_node; ++i) node_of.push_back(i / per_node);
  return Placement(node_of);
}

}  // namespace

TEST_CASE("ring on one node costs (N-1)(alpha + M beta)", "[cost]") {
  CostParams c;
  c.copy_s_per_byte = 0;
  for (int n : {2, 5, 16}) {
    const std::size_t m = 1000;
    const double want = (n - 1) * (c.node.alpha_s + m * c.node.beta_s_per_byte);
    CHECK(predict_seconds(ring_planner(), Layout::uniform(n, m), Placement::single_node(n), c) ==
          Approx(want));
  }
}

TEST_CASE("recursive doubling doubles the bytes each round", "[cost]") {
  CostParams c;
  c.copy_s_per_byte = 0;
  const int n = 8;
  const std::size_t m = 100;
  double want = 0;
  for (int k = 0; k < 3; ++k) want += c.node.alpha_s + (m << k) * c.node.beta_s_per_byte;
  CHECK(predict_seconds(recursive_doubling_planner(), Layout::uniform(n, m),
                        Placement::single_node(n), c) == Approx(want));
}

TEST_CASE("log-round algorithms win small messages, ring wins large ones across nodes", "[cost]") {
  const CostParams c;
  const Placement p = blocks_of(8, 8);
  auto t = [&](const Planner& pl, std::size_t m) { return predict_seconds(pl, Layout::uniform(64, m), p, c); };
  CHECK(t(bruck_planner(), 8) < t(ring_planner(), 8));
  CHECK(t(recursive_doubling_planner(), 8) < t(ring_planner(), 8));
  // 1 MiB per rank: Bruck's far messages share each node's NIC, the ring's do not.
  CHECK(t(ring_planner(), 1 << 20) < t(bruck_planner(), 1 << 20));
}

TEST_CASE("uneven blocks: the largest block dominates the ring", "[cost]") {
  CostParams c;
  c.copy_s_per_byte = 0;
  std::vector<std::size_t> bytes{0, 0, 1 << 20, 0}, offsets{0, 0, 0, 1 << 20};
  const double t = predict_seconds(ring_planner(), Layout::varying(bytes, offsets),
                                   Placement::single_node(4), c);
  // The big block crosses 3 hops, each a round of alpha + 1 MiB beta.
  CHECK(t == Approx(3 * (c.node.alpha_s + (1 << 20) * c.node.beta_s_per_byte)));
}

TEST_CASE("large N uses a rank sample and stays finite", "[cost]") {
  const CostParams c;
  const auto sample = sampled_ranks(4096);
  CHECK(sample.size() < 20);
  CHECK(predict_seconds(bruck_planner(), Layout::uniform(4096, 8), blocks_of(512, 8), c) > 0);
}

#include "core/tuning.hpp"

#include <agx/error.hpp>

TEST_CASE("tuning files round-trip and reject bad lines", "[tuning]") {
  Tuning t;
  t.header = {"machine host1 AMD EPYC", "command agx-tune"};
  t.params.node.alpha_s = 2.5e-6;
  t.params.network.beta_s_per_byte = 1e-10;
  t.best = {{4, 4, 64, Algorithm::shared_memory}, {4, 4, 1 << 20, Algorithm::ring}};
  const Tuning back = parse_tuning(format_tuning(t), "test");
  CHECK(back.params.node.alpha_s == Approx(2.5e-6));
  CHECK(back.params.network.beta_s_per_byte == Approx(1e-10));
  CHECK(back.header == t.header);
  REQUIRE(back.best.size() == 2);
  CHECK(back.measured(4, 4, 8) == Algorithm::shared_memory);
  CHECK(back.measured(4, 4, 1000) == Algorithm::ring);
  CHECK(back.measured(4, 4, 2 << 20) == Algorithm::automatic);  // beyond what was measured
  CHECK(back.measured(8, 4, 8) == Algorithm::automatic);        // another shape
  CHECK_THROWS_AS(parse_tuning("agx-tuning 1\nnode.alpha_s -1\n", "t"), Error);
  CHECK_THROWS_AS(parse_tuning("agx-tuning 1\nbest 4 4 64 warp_drive\n", "t"), Error);
  CHECK_THROWS_AS(parse_tuning("node.alpha_s 1\n", "t"), Error);
  CHECK_THROWS_AS(parse_tuning("agx-tuning 2\n", "t"), Error);
}
