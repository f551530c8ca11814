// The registry (lib/core/registry.cpp): one entry per algorithm, consistent with its
// planner, and AGX_ALGO's syntax for names and parameters ("bruck:k=4").

#include <catch2/catch.hpp>

#include <agx/error.hpp>

#include "core/registry.hpp"

#include <set>
#include <string>

using namespace agx;

TEST_CASE("registry entries are complete and agree with their planners", "[registry]") {
  std::set<std::string_view> names;
  int index = 0;
  for (const RegistryEntry& e : registry()) {
    INFO(e.info.name);
    CHECK(static_cast<int>(e.info.id) == index++);
    CHECK(names.insert(e.info.name).second);
    CHECK(!e.info.summary.empty());
    CHECK(!e.file.empty());
    CHECK(to_string(e.info.id) == e.info.name);
    CHECK(parse_algorithm(e.info.name) == e.info.id);
    CHECK(&algorithm_info(e.info.id) == &algorithms()[static_cast<std::size_t>(e.info.id)]);
    CHECK(e.info.point_to_point == (e.planner != nullptr));
    if (e.planner != nullptr) {
      CHECK(e.planner().id() == e.info.id);
      CHECK(&planner_for(e.info.id) == &e.planner());
    } else {
      CHECK_THROWS_AS(planner_for(e.info.id), Error);
    }
    // A parameter: the default is among the listed radices, all of them valid.
    if (e.info.default_radix != 0) {
      CHECK(e.info.default_radix >= 2);
      CHECK(!e.info.parameters.empty());
      bool has_default = false;
      for (int k : e.info.radices) has_default = has_default || k == e.info.default_radix;
      CHECK(has_default);
    } else {
      CHECK(e.info.radices.empty());
    }
  }
  CHECK(registry().front().info.id == Algorithm::automatic);
  std::size_t planned = 0;
  for (const RegistryEntry& e : registry()) planned += e.planner != nullptr ? 1 : 0;
  CHECK(all_planners().size() == planned);
}

TEST_CASE("every variant prints as AGX_ALGO text that parses back to it", "[registry]") {
  for (const AlgorithmChoice& c : algorithm_variants()) {
    const std::string text = to_string(c);
    INFO(text);
    std::string why;
    const auto back = parse_algorithm_choice(text, &why);
    REQUIRE(back.has_value());
    CHECK(*back == resolve(c));
    CHECK(why.empty());
  }
}

TEST_CASE("AGX_ALGO text with bad names or parameters is refused with the reason", "[registry]") {
  auto refused = [](std::string_view text, std::string_view reason) {
    std::string why;
    INFO(text);
    CHECK_FALSE(parse_algorithm_choice(text, &why).has_value());
    CHECK_THAT(why, Catch::Contains(std::string(reason)));
  };
  refused("no_such_algorithm", "names no algorithm (known: auto, direct");
  refused("", "names no algorithm");
  refused("ring:k=4", "'ring' takes no parameters");
  refused("auto:k=2", "'auto' takes no parameters");
  CHECK(parse_algorithm_choice("auto") == AlgorithmChoice{Algorithm::automatic, 0});
  CHECK(parse_algorithm_choice("ring") == AlgorithmChoice{Algorithm::ring, 0});
  for (const AlgorithmInfo& i : algorithms()) {
    if (i.default_radix == 0) {
      CHECK_THROWS_AS(resolve({i.id, 4}), Error);
      continue;
    }
    const std::string n(i.name);
    CHECK(parse_algorithm_choice(n) == AlgorithmChoice{i.id, i.default_radix});
    CHECK(parse_algorithm_choice(n + ":k=5") == AlgorithmChoice{i.id, 5});
    CHECK(parse_algorithm_choice(n + ":k=1000000") == AlgorithmChoice{i.id, 1000000});
    CHECK(to_string(AlgorithmChoice{i.id, 5}) == n + ":k=5");
    CHECK(to_string(AlgorithmChoice{i.id, i.default_radix}) == n);
    refused(n + ":k=1", "the radix must be 2 or more");
    refused(n + ":k=0", "the radix must be 2 or more");
    refused(n + ":k=-3", "the radix must be 2 or more");
    refused(n + ":k=99999999999", "the radix must be 2 or more");
    refused(n + ":k=four", "is not a whole number");
    refused(n + ":k=4x", "is not a whole number");
    refused(n + ":k=", "is not a whole number");
    refused(n + ":", "is not key=value");
    refused(n + ":4", "is not key=value");
    refused(n + ":r=4", "has no parameter 'r'");
    CHECK(resolve({i.id, 0}) == AlgorithmChoice{i.id, i.default_radix});
    CHECK(resolve({i.id, 7}) == AlgorithmChoice{i.id, 7});
    try {
      resolve({i.id, 1});
      FAIL("radix 1 accepted");
    } catch (const Error& e) {
      CHECK(e.error_class() == MPI_ERR_ARG);
      CHECK_THAT(e.what(), Catch::Contains("the radix must be 2 or more"));
    }
  }
}
