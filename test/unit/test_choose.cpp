// The one chooser (lib/core/choose.hpp), without MPI: the path follows the algorithm,
// the first-call rule swaps an automatic node path for the best point-to-point one
// (never a forced one, never a plan's), direct write is tried only by blocking automatic
// calls on one node whose choice is not shared_memory, and one rank is the own copy.

#include <catch2/catch.hpp>

#include "core/algorithm_trials.hpp"
#include "core/choose.hpp"
#include "core/registry.hpp"
#include "core/select.hpp"

#include <optional>

using namespace agx;

namespace {

const Options automatic{Algorithm::automatic, false};

Selector on_nodes(std::vector<int> node_of) {
  return Selector(Placement(std::move(node_of)), Tuning{}, NodeStageParams{});
}

CallFacts facts(CallKind kind, bool node_begun = true) {
  CallFacts f;
  f.kind = kind;
  f.node_begun = node_begun;
  return f;
}

/// A size per rank (powers of 4 from 1 B to 64 MiB) at which the selector's automatic
/// choice is, or is not, a node path.
std::optional<std::size_t> size_where(Selector& s, int n, bool node) {
  for (std::size_t bytes = 1; bytes <= (std::size_t{64} << 20); bytes *= 4)
    if (is_node_path(s.choose(Layout::uniform(n, bytes), false).id) == node) return bytes;
  return std::nullopt;
}

}  // namespace

TEST_CASE("choose: node paths are the registry's entries without a message schedule", "[choose]") {
  for (const RegistryEntry& e : registry()) {
    if (e.info.id == Algorithm::automatic) {
      CHECK_FALSE(is_node_path(e.info.id));
      continue;
    }
    INFO(e.info.name);
    CHECK(is_node_path(e.info.id) == !e.info.point_to_point);
  }
  CHECK(is_node_path(Algorithm::shared_memory));
  CHECK(is_node_path(Algorithm::hierarchical));
  CHECK_FALSE(is_node_path(Algorithm::ring));
}

TEST_CASE("choose: the path follows the algorithm; one rank is the own copy", "[choose]") {
  Selector one = on_nodes({0});
  const CallChoice c1 = choose(one, Layout::uniform(1, 64), automatic, facts(CallKind::blocking));
  CHECK(c1.path == CallPath::own_copy);
  CHECK_FALSE(c1.try_direct_write);

  Selector sel = on_nodes({0, 0, 0, 0});
  const Layout layout = Layout::uniform(4, 1024);
  for (Algorithm a : {Algorithm::ring, Algorithm::bruck, Algorithm::shared_memory}) {
    const CallChoice c = choose(sel, layout, Options{a, false, 0}, facts(CallKind::nonblocking));
    INFO(to_string(a));
    CHECK(c.algorithm.id == a);
    CHECK(c.path == (a == Algorithm::shared_memory ? CallPath::node : CallPath::point_to_point));
    CHECK_FALSE(c.deferred);
  }
  // Radix parameters pass through; forced algorithms that cannot serve are errors.
  CHECK(choose(sel, layout, Options{Algorithm::bruck, false, 4}, facts(CallKind::blocking)).algorithm.radix == 4);
  Selector two_nodes = on_nodes({0, 0, 1, 1});
  CHECK_THROWS(choose(two_nodes, layout, Options{Algorithm::shared_memory, false, 0},
                      facts(CallKind::blocking)));
  CHECK(choose(two_nodes, layout, Options{Algorithm::hierarchical, false, 0}, facts(CallKind::blocking)).path ==
        CallPath::node);
}

TEST_CASE("choose: the first-call rule defers automatic node paths only", "[choose]") {
  Selector sel = on_nodes({0, 0, 0, 0});
  const std::optional<std::size_t> bytes = size_where(sel, 4, true);
  REQUIRE(bytes);  // the built-in model takes shared memory somewhere on one node
  const Layout layout = Layout::uniform(4, *bytes);
  const AlgorithmChoice best_p2p = sel.best_point_to_point(layout, false);
  REQUIRE_FALSE(is_node_path(best_p2p.id));

  for (CallKind kind : {CallKind::blocking, CallKind::nonblocking, CallKind::query}) {
    const CallChoice first = choose(sel, layout, automatic, facts(kind, false));
    CHECK(first.deferred);
    CHECK(first.algorithm == best_p2p);
    CHECK(first.path == CallPath::point_to_point);
    const CallChoice later = choose(sel, layout, automatic, facts(kind, true));
    CHECK_FALSE(later.deferred);
    CHECK(later.path == CallPath::node);
  }
  // A plan keeps its node path; a forced node path is never swapped.
  CHECK(choose(sel, layout, automatic, facts(CallKind::persistent, false)).path == CallPath::node);
  const CallChoice forced =
      choose(sel, layout, Options{Algorithm::shared_memory, false, 0}, facts(CallKind::blocking, false));
  CHECK_FALSE(forced.deferred);
  CHECK(forced.path == CallPath::node);
}

TEST_CASE("choose: direct write is tried by blocking automatic calls on one node", "[choose]") {
  Selector sel = on_nodes({0, 0, 0, 0});
  const std::optional<std::size_t> p2p_bytes = size_where(sel, 4, false);
  const std::optional<std::size_t> node_bytes = size_where(sel, 4, true);
  REQUIRE(p2p_bytes);
  REQUIRE(node_bytes);
  auto with_size = [](CallKind kind) {
    CallFacts f = facts(kind);
    f.direct_write_size = true;
    return f;
  };
  const Layout p2p = Layout::uniform(4, *p2p_bytes);
  CHECK(choose(sel, p2p, automatic, with_size(CallKind::blocking)).try_direct_write);
  CHECK_FALSE(choose(sel, p2p, automatic, facts(CallKind::blocking)).try_direct_write);  // size
  CHECK_FALSE(choose(sel, p2p, automatic, with_size(CallKind::nonblocking)).try_direct_write);
  CHECK_FALSE(choose(sel, p2p, automatic, with_size(CallKind::persistent)).try_direct_write);
  CHECK_FALSE(choose(sel, p2p, Options{Algorithm::ring, false, 0}, with_size(CallKind::blocking)).try_direct_write);
  // shared_memory tries it inside its own path.
  CHECK_FALSE(choose(sel, Layout::uniform(4, *node_bytes), automatic, with_size(CallKind::blocking)).try_direct_write);
  // Two nodes: never.
  Selector two = on_nodes({0, 0, 1, 1});
  CHECK_FALSE(choose(two, p2p, automatic, with_size(CallKind::blocking)).try_direct_write);
}

TEST_CASE("choose: device jobs are settled by lib/cuda first, with the same algorithm", "[choose]") {
  Selector sel = on_nodes({0, 0, 0});
  const Layout layout = Layout::uniform(3, 4096);
  CallFacts f = facts(CallKind::nonblocking);
  const CallChoice host = choose(sel, layout, automatic, f);
  f.device = true;
  const CallChoice device = choose(sel, layout, automatic, f);
  CHECK(device.device);
  CHECK_FALSE(host.device);
  CHECK(device.algorithm == host.algorithm);
  CHECK(device.path == host.path);
}

TEST_CASE("choose: a caller of messages only gets the best point-to-point algorithm", "[choose]") {
  Selector sel = on_nodes({0, 0, 0, 0});
  const auto node_size = size_where(sel, 4, true);
  REQUIRE(node_size);
  const Layout layout = Layout::uniform(4, *node_size);
  CallFacts f = facts(CallKind::nonblocking);
  f.messages_only = true;
  // Automatic and forced node paths alike, whatever the set-up (encoded phases).
  for (const Options& o : {automatic, Options{Algorithm::shared_memory, false, 0}}) {
    const CallChoice c = choose(sel, layout, o, f);
    CHECK(c.path == CallPath::point_to_point);
    CHECK(c.deferred);
    CHECK(c.algorithm == sel.best_point_to_point(layout, false));
  }
  // A forced point-to-point algorithm stays (with its radix).
  const CallChoice forced = choose(sel, layout, Options{Algorithm::bruck, false, 4}, f);
  CHECK(forced.algorithm == AlgorithmChoice{Algorithm::bruck, 4});
  CHECK_FALSE(forced.deferred);
  // Without the fact, the same forced node path is kept (node set up or not).
  CHECK(choose(sel, layout, Options{Algorithm::shared_memory, false, 0},
               facts(CallKind::nonblocking, false))
            .path == CallPath::node);
}

TEST_CASE("choose: large blocking automatic calls on one node name the rival of their choice", "[choose]") {
  Selector sel = on_nodes({0, 0, 0, 0});
  const std::size_t big = AlgorithmTrials::min_bytes;
  // Sizes from 1 MiB where the model picks the node path and where it picks messages.
  std::optional<std::size_t> node_big, p2p_big;
  for (std::size_t bytes = big; bytes <= (std::size_t{64} << 20); bytes *= 2)
    (is_node_path(sel.choose(Layout::uniform(4, bytes), false).id) ? node_big : p2p_big)
        .emplace(bytes);
  REQUIRE(p2p_big);
  const CallChoice p2p = choose(sel, Layout::uniform(4, *p2p_big), automatic, facts(CallKind::blocking));
  CHECK(p2p.path == CallPath::point_to_point);
  CHECK(p2p.rival.algorithm.id == Algorithm::shared_memory);
  CHECK(p2p.rival.path == CallPath::node);
  const CallChoice as_rival = rival_choice(p2p);
  CHECK(as_rival.algorithm.id == Algorithm::shared_memory);
  CHECK(as_rival.path == CallPath::node);
  CHECK(as_rival.rival.algorithm.id == Algorithm::automatic);  // (no rival of its own)
  // Even before the node's set-up: a trial's first call runs the choice.
  CHECK(choose(sel, Layout::uniform(4, *p2p_big), automatic, facts(CallKind::blocking, false)).rival.algorithm.id ==
        Algorithm::shared_memory);
  if (node_big) {
    const CallChoice node = choose(sel, Layout::uniform(4, *node_big), automatic, facts(CallKind::blocking));
    CHECK(node.path == CallPath::node);
    CHECK(node.rival.algorithm.id == sel.best_point_to_point(Layout::uniform(4, *node_big), false).id);
    CHECK(node.rival.path == CallPath::point_to_point);
    // The first call defers the node path: no rival then.
    CHECK(choose(sel, Layout::uniform(4, *node_big), automatic, facts(CallKind::blocking, false)).rival.algorithm.id ==
          Algorithm::automatic);
  }
  const auto no_rival = [](const CallChoice& c) { return c.rival.algorithm.id == Algorithm::automatic; };
  const Layout layout = Layout::uniform(4, *p2p_big);
  CHECK(no_rival(choose(sel, Layout::uniform(4, big / 2), automatic, facts(CallKind::blocking))));  // small
  CHECK(no_rival(choose(sel, layout, automatic, facts(CallKind::nonblocking))));
  CHECK(no_rival(choose(sel, layout, automatic, facts(CallKind::persistent))));
  CHECK(no_rival(choose(sel, layout, Options{Algorithm::direct, false, 0}, facts(CallKind::blocking))));
  CallFacts device = facts(CallKind::blocking);
  device.device = true;
  CHECK(no_rival(choose(sel, layout, automatic, device)));
  Selector two = on_nodes({0, 0, 1, 1});
  CHECK(no_rival(choose(two, layout, automatic, facts(CallKind::blocking))));
}

TEST_CASE("choose: nonblocking and persistent calls price shared_memory as the engine runs it",
          "[choose]") {
  // One node whose blocking calls may read by single copy (NodeStageParams::single_copy):
  // the round engine (nonblocking, persistent) runs the staged node schedule only, so
  // their choice is the one priced without single copy; blocking calls and queries keep
  // single copy's price.
  NodeStageParams cma;
  cma.single_copy = true;
  const std::vector<int> one(4, 0);
  Selector with(Placement(one), Tuning{}, cma), without(Placement(one), Tuning{}, NodeStageParams{});
  int differ = 0;
  for (std::size_t bytes = 1; bytes <= (std::size_t{64} << 20); bytes *= 4) {
    const Layout l = Layout::uniform(4, bytes);
    INFO(bytes << " B per rank");
    const AlgorithmChoice staged = without.choose(l, false);
    CHECK(choose(with, l, automatic, facts(CallKind::nonblocking)).algorithm == staged);
    CHECK(choose(with, l, automatic, facts(CallKind::persistent)).algorithm == staged);
    CHECK(choose(with, l, automatic, facts(CallKind::blocking)).algorithm == with.choose(l, false));
    CHECK(choose(with, l, automatic, facts(CallKind::query)).algorithm == with.choose(l, false));
    differ += with.choose(l, false) != staged;
  }
  // The two prices do part somewhere, or this test shows nothing: make single copy's
  // reads cheap and the copies through the segment dear.
  CostParams p;
  p.node.beta_s_per_byte = 1.0 / 50e9;
  p.node.alpha_s = 40e-6;
  p.copy_rates = CopyRates{};
  Tuning t;
  t.params = p;
  t.source = "test";
  Selector cheap_reads(Placement(one), t, cma), staged_only(Placement(one), t, NodeStageParams{});
  for (std::size_t bytes = 1; bytes <= (std::size_t{64} << 20); bytes *= 4) {
    const Layout l = Layout::uniform(4, bytes);
    INFO(bytes << " B per rank");
    CHECK(choose(cheap_reads, l, automatic, facts(CallKind::nonblocking)).algorithm == staged_only.choose(l, false));
    differ += cheap_reads.choose(l, false) != staged_only.choose(l, false);
  }
  CHECK(differ > 0);
}

TEST_CASE("auto against its rival: the way kept stays unless the other is clearly faster", "[choose]") {
  using T = AlgorithmTrials;
  const double m = T::margin;
  // First trials: the rival (way 1) only where it is margin faster than the choice.
  CHECK(T::decide(-1, {1.0, 0.95}) == 0);
  CHECK(T::decide(-1, {1.0, m * 0.99}) == 1);
  CHECK(T::decide(0, {1.0, 0.95}) == 0);
  // Re-trials after the rival was kept: it stays unless the choice is margin faster, so a
  // re-trial that finds the two close (a noisy moment) does not undo the first decision.
  CHECK(T::decide(1, {0.95, 1.0}) == 1);
  CHECK(T::decide(1, {1.0, 1.0}) == 1);
  CHECK(T::decide(1, {m * 0.99, 1.0}) == 0);
}
