#pragma once
// Algorithm ids and their parameters. The ids, names, summaries, parameters and
// restrictions come from the registry's data, algorithms.def next to this header, which
// lib/core/registry.cpp turns into the one registry table that the C++ option, AGX_ALGO,
// logs, tools, tests and the table in docs/algorithms.md all read.

#include <compare>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace agx {

/// `automatic`, then one id per entry of algorithms.def, in its order (`Algorithm::ring`,
/// `Algorithm::bruck`, ...; docs/algorithms.md has the table).
enum class Algorithm : int {
  automatic,  ///< let agx choose (see docs/algorithms.md, "auto")
#define AGX_PLANNER(id, ...) id,
#define AGX_NODE_PATH(id, ...) id,
#include <agx/algorithms.def>
#undef AGX_PLANNER
#undef AGX_NODE_PATH
};

/// An algorithm with its parameters, as AGX_ALGO writes it: "bruck:k=4".
struct AlgorithmChoice {
  Algorithm id = Algorithm::automatic;
  /// k of a radix-k algorithm (bruck: 2 or more); 0 for algorithms without one.
  int radix = 0;
  friend auto operator<=>(const AlgorithmChoice&, const AlgorithmChoice&) = default;
};

/// One entry of the registry, as users see it.
struct AlgorithmInfo {
  Algorithm id;
  std::string_view name;          ///< AGX_ALGO's name and the name in every log line
  std::string_view summary;       ///< one line
  std::string_view parameters;    ///< e.g. "k: radix, 2 or more (default 2)"; empty: none
  std::string_view restrictions;  ///< which calls it cannot serve
  int default_radix = 0;          ///< 0: the algorithm takes no radix
  std::span<const int> radices;   ///< the radices `auto` weighs and the test suites run
  /// A schedule of sends and receives only (the executor runs it); false for `auto` and
  /// for the shared-memory paths.
  bool point_to_point = false;
};

/// Every algorithm, `auto` first, in id order.
std::span<const AlgorithmInfo> algorithms();

/// The registry entry of `a`.
const AlgorithmInfo& algorithm_info(Algorithm a);

/// Name of an algorithm as used by AGX_ALGO and in every log line.
std::string_view to_string(Algorithm a);

/// "bruck:k=4"; the default radix is left out ("bruck").
std::string to_string(const AlgorithmChoice& c);

/// The name with every parameter, the default radix included ("bruck:k=2",
/// "locality_bruck:k=8", "ring"): what reports of what ran print (AGX_VERBOSE,
/// AGX_SUMMARY), so that a reader sees the radix without knowing the defaults.
/// parse_algorithm_choice reads it back.
std::string full_name(const AlgorithmChoice& c);

/// Parses a name from the registry (exact match); nullopt when unknown.
std::optional<Algorithm> parse_algorithm(std::string_view name);

/// Parses "name" or "name:k=K" (AGX_ALGO's syntax) into a choice with the default radix
/// filled in. nullopt when the text is not valid, with the reason in *why.
std::optional<AlgorithmChoice> parse_algorithm_choice(std::string_view text,
                                                      std::string* why = nullptr);

/// Every concrete algorithm at each of its radices, in registry order: what `auto`
/// weighs and what the test suites force one by one.
std::vector<AlgorithmChoice> algorithm_variants();

}  // namespace agx
