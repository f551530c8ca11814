// Compiled message descriptors (lib/core/descriptors.hpp) without MPI: schedules whose
// messages are single memory runs need no datatype, so no MPI call is made here.

#include <catch2/catch.hpp>

#include "core/descriptors.hpp"
#include "core/planner.hpp"

#include <memory>
#include <vector>

using namespace agx;

TEST_CASE("descriptors: ring's messages are bound to the buffers by offset") {
  const Schedule s = planner_for(Algorithm::ring).plan({4, 1, 0});
  const CompiledSchedule c(s, Layout::uniform(4, 10), false, 4);
  REQUIRE(c.usable());
  CHECK(c.datatypes() == 0);
  // round 0: the own block (1) from the send buffer, cut into 4 + 4 + 2 bytes
  const auto send0 = c.send(0, 0);
  REQUIRE(send0.size() == 3);
  CHECK(send0[0].from_send);
  CHECK(send0[0].offset == 0);
  CHECK(send0[1].offset == 4);
  CHECK(send0[2].bytes == 2);
  CHECK(send0[2].count == 2);
  // its receive: block 0 into the receive buffer at 0
  const auto recv0 = c.recv(0, 0);
  REQUIRE(recv0.size() == 3);
  CHECK_FALSE(recv0[0].from_send);
  CHECK(recv0[0].offset == 0);
  // round 1 forwards block 0, from the receive buffer
  const auto send1 = c.send(1, 0);
  REQUIRE(send1.size() == 3);
  CHECK_FALSE(send1[0].from_send);
  CHECK(send1[0].offset == 0);
  // in place, round 0 sends the own block from its place in the receive buffer
  const CompiledSchedule in_place(s, Layout::uniform(4, 10), true, 4);
  CHECK_FALSE(in_place.send(0, 0)[0].from_send);
  CHECK(in_place.send(0, 0)[0].offset == 10);
}

TEST_CASE("descriptors: a key matches only its schedule, layout, in-place use and split") {
  const Schedule s = planner_for(Algorithm::ring).plan({3, 0, 0});
  const Schedule other = planner_for(Algorithm::ring).plan({3, 0, 0});
  const std::vector<std::size_t> bytes{4, 4, 4}, offsets{0, 4, 8}, gaps{0, 8, 16};
  const CompiledSchedule c(s, Layout::varying(bytes, offsets), false, 1024);
  CHECK(c.matches(s, Layout::varying(bytes, offsets), false, 1024));
  CHECK_FALSE(c.matches(s, Layout::uniform(3, 4), false, 1024));  // same bytes, other form
  CHECK_FALSE(c.matches(s, Layout::varying(bytes, gaps), false, 1024));
  CHECK_FALSE(c.matches(s, Layout::varying(bytes, offsets), true, 1024));
  CHECK_FALSE(c.matches(s, Layout::varying(bytes, offsets), false, 512));
  CHECK_FALSE(c.matches(other, Layout::varying(bytes, offsets), false, 1024));
}

TEST_CASE("descriptors: the cache is bounded, least recently used out, held entries live on") {
  const Schedule s = planner_for(Algorithm::ring).plan({4, 2, 0});
  DescriptorCache cache(2);
  const auto a = cache.compile(s, Layout::uniform(4, 8), false, 1024);
  const auto b = cache.compile(s, Layout::uniform(4, 16), false, 1024);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(cache.find(s, Layout::uniform(4, 8), false, 1024) == a);  // a is now the most recent
  std::shared_ptr<CompiledSchedule> held = cache.find(s, Layout::uniform(4, 16), false, 1024);
  CHECK(cache.find(s, Layout::uniform(4, 8), false, 1024) == a);
  const auto c = cache.compile(s, Layout::uniform(4, 24), false, 1024);  // b out
  CHECK(cache.size() == 2);
  CHECK(cache.compilations() == 3);
  CHECK_FALSE(cache.find(s, Layout::uniform(4, 16), false, 1024));
  CHECK(cache.find(s, Layout::uniform(4, 8), false, 1024) == a);
  CHECK(cache.find(s, Layout::uniform(4, 24), false, 1024) == c);
  // an evicted entry a pending call holds is intact
  REQUIRE(held);
  CHECK(held->send(0, 0)[0].bytes == 16);
  // many shapes: never more than the capacity
  for (std::size_t m = 1; m <= 50; ++m) cache.compile(s, Layout::uniform(4, m), false, 1024);
  CHECK(cache.size() == 2);
}

TEST_CASE("descriptors: capacity 0 compiles nothing") {
  const Schedule s = planner_for(Algorithm::ring).plan({2, 0, 0});
  DescriptorCache cache(0);
  CHECK_FALSE(cache.compile(s, Layout::uniform(2, 8), false, 1024));
  CHECK(cache.size() == 0);
}

TEST_CASE("descriptors: the scratch vectors go to one execution at a time") {
  const Schedule s = planner_for(Algorithm::ring).plan({2, 0, 0});
  CompiledSchedule c(s, Layout::uniform(2, 8), false, 1024);
  ExecutionScratch* first = c.take_scratch();
  REQUIRE(first != nullptr);
  CHECK(c.take_scratch() == nullptr);
  c.give_back(first);
  CHECK(c.take_scratch() == first);
}
