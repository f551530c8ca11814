// The fused group's decision (lib/fused/decision.hpp) with the built-in α/β: it must not
// take the measured losing ways of docs/results.md ("Fused all-gathers": one fused call
// where the separate calls are faster), it must still fuse small members, and it never
// prices above the separate calls.

#include <catch2/catch.hpp>

#include "core/choose.hpp"
#include "core/nonblocking.hpp"
#include "core/select.hpp"
#include "fused/decision.hpp"

#include <string>

using namespace agx;

namespace {

Selector one_node(int n) { return Selector(Placement::single_node(n), Tuning{}, NodeStageParams{}); }

/// The same with one copy rate at every size (a tuning file's copy_s_per_byte alone).
Selector one_node_one_rate(int n) {
  Tuning t;
  t.source = "one copy rate";  // not "built-in defaults", which the selector reloads
  t.params.copy_rates.clear();
  return Selector(Placement::single_node(n), t, NodeStageParams{});
}

std::vector<std::vector<std::size_t>> uniform(int n, int k, std::size_t bytes) {
  return std::vector<std::vector<std::size_t>>(static_cast<std::size_t>(k),
                                               std::vector<std::size_t>(static_cast<std::size_t>(n), bytes));
}

std::string describe(const FusionDecision& d) {
  std::string s = std::to_string(d.calls.size()) + " call(s):";
  for (const FusionCall& c : d.calls)
    s += " [" + std::to_string(c.members.size()) + " on " + to_string(c.algorithm) +
         (c.staged ? " staged" : "") + "]";
  return s + " predicted " + std::to_string(d.predicted_s * 1e6) + " us, one call " +
         std::to_string(d.one_call_s * 1e6) + " us, separate " + std::to_string(d.separate_s * 1e6) + " us";
}

/// Whether the decision is the measured losing one: every member in one fused call on
/// `path`.
bool one_call_on(const FusionDecision& d, std::size_t k, Algorithm path) {
  return d.calls.size() == 1 && d.calls.front().members.size() == k && d.calls.front().algorithm.id == path;
}

}  // namespace

TEST_CASE("fusion: the measured losing points are not fused as one call", "[fusion]") {
  struct Point { int n, k; std::size_t bytes; Algorithm lost_on; bool staged; };
  // docs/results.md: N = 2 at 4 KiB x 16 and x 64 lost on `direct` (segmented), N = 4
  // at 16 KiB x 4, 64 KiB x 4 and 64 KiB x 64 on `shared_memory` when it ran staged
  // (which it still does under AGX_INTEGRITY: segments off).
  const Point points[] = {{2, 16, 4096, Algorithm::direct, false}, {2, 64, 4096, Algorithm::direct, false},
                          {4, 4, 16384, Algorithm::shared_memory, true}, {4, 4, 65536, Algorithm::shared_memory, true},
                          {4, 64, 65536, Algorithm::shared_memory, true}};
  for (const Point& p : points) {
    Selector sel = one_node(p.n);
    FusionSettings settings;
    settings.segments = !p.staged;
    const FusionDecision d = decide_fusion(sel, uniform(p.n, p.k, p.bytes), settings);
    INFO("N=" << p.n << " K=" << p.k << " " << p.bytes << " B: " << describe(d));
    CHECK_FALSE(one_call_on(d, static_cast<std::size_t>(p.k), p.lost_on));
    CHECK(d.predicted_s <= d.separate_s);
  }
}

TEST_CASE("fusion: small members are fused into one call", "[fusion]") {
  for (int n : {2, 4})
    for (int k : {4, 16, 64})
      for (std::size_t bytes : {64, 256}) {
        Selector sel = one_node(n);
        const FusionDecision d = decide_fusion(sel, uniform(n, k, bytes));
        INFO("N=" << n << " K=" << k << " " << bytes << " B: " << describe(d));
        REQUIRE(d.calls.size() == 1);
        CHECK(d.calls.front().members.size() == static_cast<std::size_t>(k));
        CHECK(d.predicted_s < d.separate_s);
      }
}

TEST_CASE("fusion: never priced above the separate calls", "[fusion]") {
  for (int n : {2, 3, 4, 8})
    for (int k : {2, 4, 16, 64})
      for (std::size_t bytes = 1; bytes <= (1u << 20); bytes *= 4) {
        Selector sel = one_node(n);
        const FusionDecision d = decide_fusion(sel, uniform(n, k, bytes));
        INFO("N=" << n << " K=" << k << " " << bytes << " B: " << describe(d));
        CHECK(d.predicted_s <= d.separate_s);
        CHECK(d.predicted_s <= d.one_call_s);
        std::size_t members = 0;
        for (const FusionCall& c : d.calls) members += c.members.size();
        CHECK(members == static_cast<std::size_t>(k));  // every member exactly once
      }
}

TEST_CASE("fusion: a node path's segmented call is priced as its node stage", "[fusion]") {
  // Segmented on shared_memory the node stage gathers and scatters the pieces: the fused
  // call costs the prediction for its layout in place plus the own pieces moved into
  // place, nothing for a staging buffer (the staged price adds every byte once more).
  // One copy rate, so that the fused call is the cheaper and the decision's: with the
  // built-in rates by size the separate 16 KiB calls are priced at the cached rate and
  // the fused call in place at the 4 MiB one, and the separate calls win.
  for (std::size_t bytes : {std::size_t{16384}, std::size_t{65536}}) {
    Selector sel = one_node_one_rate(4);
    const auto members = uniform(4, 4, bytes);
    const Layout layout = Layout::uniform(4, 4 * bytes);
    const std::size_t total = 16 * bytes, own = 4 * bytes;
    const double copy = copy_s_per_byte_at(sel.tuning().params, total);
    double shm = 0;
    for (const auto& [a, s] : sel.predictions(layout, true))
      if (a.id == Algorithm::shared_memory) shm = s;
    REQUIRE(shm > 0);
    const FusionDecision d = decide_fusion(sel, members);
    INFO(bytes << " B x 4: " << describe(d));
    REQUIRE(d.calls.size() == 1);
    CHECK(d.calls.front().algorithm.id == Algorithm::shared_memory);
    CHECK_FALSE(d.calls.front().staged);
    CHECK(d.one_call_s == Approx(shm + copy * static_cast<double>(own)));
    FusionSettings staged;
    staged.segments = false;
    const FusionDecision s = decide_fusion(sel, members, staged);
    CHECK(s.one_call_s >= d.one_call_s + copy * static_cast<double>(total) * 0.999);
  }
}

TEST_CASE("fusion: small members fused, a large one alone", "[fusion]") {
  // 32 members of 64 B and one of 4 MiB at N = 4, staged (AGX_INTEGRITY): the large one
  // would pay the staging copy inside the fused call; the small ones still share one
  // start-up. Segmented (the default) nothing is staged: with one copy rate all run as
  // one call; with the built-in rates by size the large one runs alone on `direct` (a
  // 4 MiB block on shared memory is priced at the 16 MiB copy rate, 3.6 GB/s) and the
  // small ones still share one call.
  auto bytes = uniform(4, 32, 64);
  bytes.insert(bytes.begin() + 5, std::vector<std::size_t>(4, std::size_t{4} << 20));
  {
    Selector flat = one_node_one_rate(4);
    const FusionDecision one = decide_fusion(flat, bytes);
    INFO(describe(one));
    REQUIRE(one.calls.size() == 1);
    CHECK(one.calls.front().members.size() == 33);
  }
  Selector sel = one_node(4);
  {
    const FusionDecision one = decide_fusion(sel, bytes);
    INFO(describe(one));
    REQUIRE(one.calls.size() == 2);
    CHECK(one.calls[0].members.size() == 32);
    CHECK(one.calls[1].members == std::vector<std::size_t>{5});
    CHECK(one.calls[1].algorithm.id == Algorithm::direct);
    CHECK(one.predicted_s <= one.one_call_s);
  }
  FusionSettings staged;
  staged.segments = false;
  const FusionDecision d = decide_fusion(sel, bytes, staged);
  INFO(describe(d));
  REQUIRE(d.calls.size() == 2);
  CHECK(d.calls[0].members.size() == 32);  // ordered by first member: the small ones first
  CHECK(d.calls[1].members == std::vector<std::size_t>{5});
  CHECK(d.predicted_s < d.one_call_s);
  CHECK(d.predicted_s < d.separate_s);
}

TEST_CASE("fusion: settings the ranks share change the paths priced", "[fusion]") {
  Selector sel = one_node(4);
  const auto members = uniform(4, 16, 64);
  FusionSettings no_node;
  no_node.node_paths = false;  // a nonblocking group before the node's segment is set up
  for (const FusionCall& c : decide_fusion(sel, members, no_node).calls)
    CHECK_FALSE(is_node_path(c.algorithm.id));
  FusionSettings checks;
  checks.segments = false;  // AGX_INTEGRITY: every fused call staged
  for (const FusionCall& c : decide_fusion(sel, members, checks).calls)
    if (c.members.size() > 1) CHECK(c.staged);
  // A group of one is that member's own call.
  const FusionDecision one = decide_fusion(sel, uniform(4, 1, 4096));
  REQUIRE(one.calls.size() == 1);
  CHECK(one.calls.front().algorithm == sel.choose(Layout::uniform(4, 4096), false));
}

TEST_CASE("fusion: a fused call runs the tuning file's measured winner for its size", "[fusion]") {
  // The 4 x 2 cluster at 1 Gb/s (docs/results.md, "Fused all-gathers across the
  // cluster"): its agx-tune file measured `distance_halving` fastest at 64-256 KiB per
  // rank, where the model alone preferred `hierarchical`; K = 16 members of 16 KiB fuse
  // into 256 KiB per rank.
  const Tuning t = parse_tuning(
      "agx-tuning 1\n"
      "node.alpha_s 2.1432e-05\nnode.beta_s_per_byte 7.81779e-10\nnode.overhead_s 0\n"
      "network.alpha_s 4.45465e-05\nnetwork.overhead_s 2.83385e-05\n"
      "network.beta_s_per_byte 8.74706e-09\nnode.rendezvous_s 0\nnode.eager_bytes 0\n"
      "network.rendezvous_s 0\nnetwork.eager_bytes 0\ncopy_s_per_byte 1.10219e-10\n"
      "node_sync_s 1.24135e-05\n"
      "best 8 2 16384 hierarchical\nbest 8 2 65536 distance_halving\n"
      "best 8 2 262144 distance_halving\nbest 8 2 1048576 ring\n",
      "the cluster's file");
  Selector sel(Placement({0, 0, 1, 1, 2, 2, 3, 3}), t, NodeStageParams{});
  const auto members = uniform(8, 16, 16384);
  std::vector<std::size_t> fused_bytes(8, 16 * 16384), offsets(8);
  for (std::size_t r = 0; r < 8; ++r) offsets[r] = r * 16 * 16384;
  const Layout fused = Layout::varying(fused_bytes, offsets);
  REQUIRE(sel.measured(fused).id == Algorithm::distance_halving);
  const FusionDecision d = decide_fusion(sel, members);
  INFO(describe(d));
  for (const FusionCall& c : d.calls)
    if (c.members.size() > 1) CHECK(c.algorithm.id == Algorithm::distance_halving);
  // Without the measured lines the model's own cheapest runs (the test can tell them apart).
  Tuning model_only = t;
  model_only.best.clear();
  Selector plain(Placement({0, 0, 1, 1, 2, 2, 3, 3}), model_only, NodeStageParams{});
  const FusionDecision m = decide_fusion(plain, members);
  INFO("model only: " << describe(m));
  bool other = false;
  for (const FusionCall& c : m.calls)
    if (c.members.size() > 1) other = other || c.algorithm.id != Algorithm::distance_halving;
  CHECK(other);
}
