#pragma once
// Algorithm ids and their parameters. Names, summaries, parameters and restrictions
// come from the one registry in libagx (lib/core/registry.cpp), which the C++ option,
// AGX_ALGO, logs, tools, tests and the table in docs/algorithms.md all read.

#include <compare>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace agx {

enum class Algorithm : int {
  automatic,           ///< let agx choose (see docs/algorithms.md, "auto")
  direct,              ///< one round, every rank sends its block to every other rank
  ring,                ///< N-1 rounds, one block per round to the right neighbour
  neighbor_exchange,   ///< N/2 rounds, two blocks per round, alternating neighbours
  recursive_doubling,  ///< log2 N rounds, doubling data per round (folding for any N)
  bruck,               ///< log N rounds for any N, blocks addressed by index (no rotation)
  hierarchical,        ///< node stage in shared memory + node aggregates between nodes
  shared_memory,       ///< all ranks on one node: shared segment or single copy
  distance_halving,    ///< recursive doubling, largest distance first (Sparbit's idea)
  locality_bruck,      ///< Bruck over groups of k ranks, most rounds inside a group
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
