// Every algorithm's schedule, validated symbolically for many rank counts: no MPI.
// "Every algorithm" is every planner of the registry, at radices 2, 3, 4, 5, 8 and the
// ones the registry lists when it takes a radix.

#include <catch2/catch.hpp>

#include "core/message.hpp"
#include "core/planner.hpp"
#include "core/registry.hpp"
#include "core/validator.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "test_layouts.hpp"
#include "test_limits.hpp"

using namespace agx;

namespace {

std::vector<int> rank_counts() {
  std::vector<int> ns;
  for (int n = 1; n <= 64; ++n) ns.push_back(n);
  for (int n : {100, 127, 128, 255, 256, 1000, 1024})
    if (n <= agx_test::max_ranks()) ns.push_back(n);
  return ns;
}

std::vector<Schedule> plan_all(const Planner& p, int n, int radix = 0) {
  std::vector<Schedule> s;
  for (int r = 0; r < n; ++r) s.push_back(p.plan({n, r, radix}));
  return s;
}

// Every planner of the registry with each radix to prove it at (0: none).
struct Variant {
  const Planner* planner;
  int radix;
  std::string name;
};
std::vector<Variant> variants() {
  std::vector<Variant> v;
  for (const RegistryEntry& e : registry()) {
    if (e.planner == nullptr) continue;
    std::vector<int> radices{0};
    if (e.info.default_radix != 0) {
      radices = {2, 3, 4, 5, 8};
      for (int k : e.info.radices)
        if (std::find(radices.begin(), radices.end(), k) == radices.end()) radices.push_back(k);
    }
    for (int k : radices) v.push_back({&e.planner(), k, to_string(AlgorithmChoice{e.info.id, k})});
  }
  return v;
}

}  // namespace

TEST_CASE("every algorithm's schedule is a correct all-gather", "[validator]") {
  for (const Variant& v : variants()) {
    for (int n : rank_counts()) {
      if (!v.planner->unsupported_reason({n, 0, v.radix}).empty()) continue;
      INFO(v.name << " (radix " << v.radix << ") at N=" << n);
      REQUIRE(validate(plan_all(*v.planner, n, v.radix)) == "");
    }
  }
}

// Staged for device buffers (stage_on_device): every rank, or every other rank (a call
// where ranks with host buffers take part: their schedules stay the host ones).
TEST_CASE("every algorithm staged on device buffers is proven, device copies included", "[validator]") {
  for (const Variant& v : variants()) {
    for (int n : rank_counts()) {
      if (n > 256 || !v.planner->unsupported_reason({n, 0, v.radix}).empty()) continue;
      INFO(v.name << " (radix " << v.radix << ") at N=" << n);
      std::vector<Schedule> all = plan_all(*v.planner, n, v.radix), mixed = all;
      for (int r = 0; r < n; ++r) {
        all[r] = stage_on_device(all[r]);
        if (r % 2 == 0) mixed[r] = all[r];
        REQUIRE(is_staged(all[r]));
      }
      REQUIRE(validate(all) == "");
      REQUIRE(validate(mixed) == "");
    }
  }
}

TEST_CASE("a staged schedule: its device copies, in its text form", "[planner]") {
  const Schedule s = stage_on_device(planner_for(Algorithm::ring).plan({3, 1}));
  CHECK(describe(s) ==
        "round 0: send(2: [1,2)) recv(0: [0,1)) copy~device([1,2)) to_host([1,2)) to_device([0,1))\n"
        "round 1: send(2: [0,1)) recv(0: [2,3)) to_device([2,3))\n");
}

TEST_CASE("the validator rejects broken staged schedules", "[validator]") {
  const int n = 5;
  auto staged = [](Algorithm a, int ranks) {
    std::vector<Schedule> s = plan_all(planner_for(a), ranks);
    for (Schedule& x : s) x = stage_on_device(x);
    return s;
  };
  SECTION("a received block never goes to the device") {
    auto s = staged(Algorithm::ring, n);
    s[3].rounds[2].device.clear();
    CHECK_THAT(validate(s), Catch::Contains("rank 3 never copies block"));
  }
  SECTION("the own block is sent before it is on the host") {
    auto s = staged(Algorithm::bruck, n);
    s[2].rounds[0].device.erase(s[2].rounds[0].device.begin());  // its to_host
    CHECK_THAT(validate(s), Catch::Contains("round 0, rank 2: sends its own block before copying it to the host"));
  }
  SECTION("a block goes to the device before it arrives") {
    auto s = staged(Algorithm::ring, n);
    s[1].rounds[0].device.push_back({DeviceCopy::Kind::to_device, {{4, 1}}});  // block 4 reaches rank 1 last
    CHECK_THAT(validate(s), Catch::Contains("round 0, rank 1: copies block 4 to the device before it holds it"));
  }
  SECTION("a block goes to the device in a later round than its receive") {
    auto s = staged(Algorithm::ring, n);
    auto& d = s[2].rounds[0].device;  // round 0: to_host and to_device of block 1
    d.erase(d.end() - 1);
    s[2].rounds[1].device.push_back({DeviceCopy::Kind::to_device, {{1, 1}}});
    CHECK_THAT(validate(s), Catch::Contains("round 1, rank 2: copies block 1 to the device, which no receive into its buffer or get of this round brought"));
  }
  SECTION("part of a receive goes to the device") {
    auto s = staged(Algorithm::bruck, 8);  // bruck's round 1 receives two blocks in one message
    Round& r1 = s[0].rounds[1];
    REQUIRE(block_count(r1.recvs[0].blocks) == 2);
    r1.device.back().blocks = {{r1.recvs[0].blocks[0].first, 1}};
    CHECK_THAT(validate(s), Catch::Contains("round 1, rank 0: copies part of its receive from"));
  }
  SECTION("the own block goes to the host after round 0") {
    auto s = staged(Algorithm::ring, n);
    s[3].rounds[1].device.push_back({DeviceCopy::Kind::to_host, {{3, 1}}});
    CHECK_THAT(validate(s), Catch::Contains("copies its own block to the host after round 0"));
  }
  SECTION("a block goes to the device twice") {
    auto s = staged(Algorithm::direct, n);
    s[0].rounds[0].device.push_back(s[0].rounds[0].device.back());
    CHECK_THAT(validate(s), Catch::Contains("to the device twice"));
  }
  SECTION("the own copy is made on the host of a staged rank") {
    auto s = staged(Algorithm::ring, n);
    s[4].rounds[0].copies[0].level = Level::node;
    CHECK_THAT(validate(s), Catch::Contains("marks its copy node-level, but its buffers are device memory"));
  }
  SECTION("a host rank marks its copy device-level") {
    auto s = plan_all(planner_for(Algorithm::ring), n);
    s[0].rounds[0].copies[0].level = Level::device;
    CHECK_THAT(validate(s), Catch::Contains("marks its copy device-level, but its buffers are host memory"));
  }
  SECTION("a block other than the own one goes to the host") {
    auto s = staged(Algorithm::ring, n);
    s[0].rounds[0].device.push_back({DeviceCopy::Kind::to_host, {{1, 1}}});
    CHECK_THAT(validate(s), Catch::Contains("copies block 1 to the host"));
  }
}

TEST_CASE("schedules cut the same messages on both sides for any block sizes", "[validator]") {
  for (const Variant& v : variants()) {
    for (int n : {1, 2, 3, 5, 8, 13, 33, 64, 100}) {
      const auto schedules = plan_all(*v.planner, n, v.radix);
      for (int pattern = 0; pattern < agx_test::size_patterns; ++pattern) {
        const auto bytes = agx_test::sizes_for(n, pattern);
        const auto offsets = agx_test::reversed_offsets(bytes);
        for (std::size_t max_bytes : {std::size_t{7}, std::size_t{64}, std::size_t{1} << 30}) {
          INFO(v.name << " (radix " << v.radix << ") N=" << n << " pattern=" << pattern << " max=" << max_bytes);
          REQUIRE(validate_messages(schedules, Layout::varying(bytes, offsets), max_bytes) == "");
        }
      }
    }
  }
}

// The "rounds" column of docs/algorithms.md (and each planner file's opening comment), for
// every point-to-point planner of lib/core/planners: direct 1; ring N-1; neighbor_exchange
// N/2 for even N, (N-1)/2 + 2 for odd N; bruck ceil(log2 N); recursive_doubling and
// distance_halving log2 N for a power of two N, floor(log2 N) + 2 otherwise (fold-in and
// fold-out rounds around the exchange).
TEST_CASE("round counts match the documented formulas", "[planner]") {
  auto rounds = [](Algorithm a, int n) { return planner_for(a).plan({n, 0}).rounds.size(); };
  auto log2floor = [](int n) { std::size_t k = 0; while ((2 << k) <= n) ++k; return k; };
  auto log2ceil = [](int n) { std::size_t k = 0; while ((1 << k) < n) ++k; return k; };
  for (int n : {2, 3, 4, 5, 7, 8, 16, 17, 100, 128}) {
    INFO("N=" << n);
    const bool pow2 = (n & (n - 1)) == 0;
    const std::size_t folded_log = pow2 ? log2floor(n) : log2floor(n) + 2;
    CHECK(rounds(Algorithm::direct, n) == 1);
    CHECK(rounds(Algorithm::ring, n) == static_cast<std::size_t>(n - 1));
    CHECK(rounds(Algorithm::neighbor_exchange, n) ==
          static_cast<std::size_t>(n % 2 == 0 ? n / 2 : (n - 1) / 2 + 2));
    CHECK(rounds(Algorithm::bruck, n) == log2ceil(n));
    CHECK(rounds(Algorithm::recursive_doubling, n) == folded_log);
    CHECK(rounds(Algorithm::distance_halving, n) == folded_log);
  }
}

namespace {

// The classic (radix 2) Bruck schedule as lib/core/planners/bruck.cpp planned it before radices.
Schedule classic_bruck(int n, int r) {
  Schedule s{n, r, {}};
  for (int dist = 1; dist < n; dist *= 2) {
    const int count = std::min(dist, n - dist);
    Round round;
    std::vector<BlockSpan> send, recv;
    append_wrapped(send, r, count, n);
    append_wrapped(recv, r + dist, count, n);
    add_send(round, (r - dist + n) % n, std::move(send));
    add_recv(round, (r + dist) % n, std::move(recv));
    s.rounds.push_back(std::move(round));
  }
  add_own_copy(s);  // every planner's schedule copies its own block in round 0
  return s;
}

bool same_transfers(const std::vector<Transfer>& a, const std::vector<Transfer>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].peer != b[i].peer || a[i].blocks != b[i].blocks) return false;
  return true;
}

}  // namespace

TEST_CASE("plain bruck (radix 2) plans exactly the classic schedule", "[planner]") {
  const Planner& bruck = planner_for(Algorithm::bruck);
  for (int n : rank_counts())
    for (int r = 0; r < n; ++r)
      for (int radix : {0, 2}) {
        const Schedule got = bruck.plan({n, r, radix}), want = classic_bruck(n, r);
        INFO("N=" << n << " rank " << r << " radix " << radix);
        REQUIRE(got.rounds.size() == want.rounds.size());
        for (std::size_t k = 0; k < got.rounds.size(); ++k) {
          REQUIRE(same_transfers(got.rounds[k].sends, want.rounds[k].sends));
          REQUIRE(same_transfers(got.rounds[k].recvs, want.rounds[k].recvs));
        }
        REQUIRE(describe(got) == describe(want));  // the own copy in round 0 too
      }
}

TEST_CASE("radix-k bruck: ceil(log_k N) rounds, k-1 peers per full round", "[planner]") {
  const Planner& bruck = planner_for(Algorithm::bruck);
  for (int k : {2, 3, 4, 5, 8, 16})
    for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 63, 64, 65, 100, 1000, 1024}) {
      if (n > agx_test::max_ranks()) continue;
      std::size_t rounds = 0;
      for (long long reach = 1; reach < n; reach *= k) ++rounds;
      rounds = std::max<std::size_t>(rounds, 1);  // one rank: the round of its own copy
      INFO("k=" << k << " N=" << n);
      const Schedule s = bruck.plan({n, n / 2, k});
      REQUIRE(s.rounds.size() == rounds);
      long long dist = 1;
      for (const Round& round : s.rounds) {
        const long long peers = std::min<long long>(k - 1, (n - 1) / dist);
        CHECK(round.sends.size() == static_cast<std::size_t>(peers));
        CHECK(round.recvs.size() == static_cast<std::size_t>(peers));
        dist *= k;
      }
    }
  // k >= N: one round, every other rank, like direct.
  CHECK(bruck.plan({6, 0, 6}).rounds.size() == 1);
  CHECK(bruck.plan({6, 0, 1000}).rounds[0].sends.size() == 5);
  CHECK(bruck.plan({6, 0, 1 << 30}).rounds[0].recvs.size() == 5);
}

TEST_CASE("the validator rejects broken schedules", "[validator]") {
  const int n = 6;
  SECTION("a rank sends a block it does not hold") {
    auto s = plan_all(planner_for(Algorithm::ring), n);
    s[2].rounds[0].sends[0].blocks[0].first = 4;
    s[3].rounds[0].recvs[0].blocks[0].first = 4;
    CHECK_THAT(validate(s), Catch::Contains("does not hold"));
  }
  SECTION("a receive is dropped") {
    auto s = plan_all(planner_for(Algorithm::bruck), n);
    s[1].rounds[1].recvs.clear();
    CHECK_THAT(validate(s), Catch::Contains("never received"));
  }
  SECTION("a receive expects other blocks") {
    auto s = plan_all(planner_for(Algorithm::recursive_doubling), 8);
    s[5].rounds[2].recvs[0].blocks[0].count = 1;
    CHECK_THAT(validate(s), Catch::Contains("does not match"));
  }
  SECTION("a rank never gets a block") {
    auto s = plan_all(planner_for(Algorithm::ring), n);
    s[0].rounds.back().recvs.clear();
    s[n - 1].rounds.back().sends.clear();
    CHECK_THAT(validate(s), Catch::Contains("ends without block"));
  }
  SECTION("a block arrives twice") {
    auto s = plan_all(planner_for(Algorithm::direct), 3);
    // rank 1 also forwards block 1 to rank 0 in a second round, where 0 already has it.
    Round extra;
    add_send(extra, 0, {{1, 1}});
    s[1].rounds.push_back(extra);
    Round extra_recv;
    add_recv(extra_recv, 1, {{1, 1}});
    s[0].rounds.push_back(extra_recv);
    CHECK_THAT(validate(s), Catch::Contains("twice"));
  }
}

TEST_CASE("messages split at the limit and merge adjacent blocks", "[message]") {
  std::vector<std::byte> recv(100), send(10);
  const Layout layout = Layout::uniform(4, 10);
  const Buffers buffers{send.data(), recv.data(), false};
  MessagePlan m;
  // Blocks 1..3 are adjacent in recv: one segment; rank 2's own block comes from `send`.
  plan_message({0, {{0, 2}}}, 3, buffers, layout, 1 << 20, m);
  REQUIRE(m.pieces() == 1);
  REQUIRE(m.segments.size() == 1);
  CHECK(m.segments[0].bytes == 20);
  plan_message({0, {{1, 3}}}, 2, buffers, layout, 1 << 20, m);
  REQUIRE(m.segments.size() == 3);  // recv[10..20), send[0..10), recv[30..40)
  CHECK(m.segments[1].ptr == send.data());
  plan_message({0, {{0, 4}}}, 9, buffers, layout, 15, m);
  REQUIRE(m.pieces() == 3);  // 40 bytes in pieces of 15, 15, 10
  CHECK(m.segments.size() == 3);
  CHECK(m.segments[2].bytes == 10);
  plan_message({0, {{0, 4}}}, 9, buffers, Layout::uniform(4, 0), 15, m);
  CHECK(m.pieces() == 0);
}
