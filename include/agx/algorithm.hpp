#pragma once
// Algorithm ids, names and one-line summaries: the single table used by the C++
// option, AGX_ALGO, logs, tools and tests.

#include <array>
#include <optional>
#include <string_view>

namespace agx {

enum class Algorithm : int {
  automatic,           ///< let agx choose (see docs/algorithms.md, "auto")
  direct,              ///< one round, every rank sends its block to every other rank
  ring,                ///< N-1 rounds, one block per round to the right neighbour
  neighbor_exchange,   ///< N/2 rounds, two blocks per round, alternating neighbours
  recursive_doubling,  ///< log2 N rounds, doubling data per round (folding for any N)
  bruck,               ///< ceil(log2 N) rounds for any N, blocks addressed by index
  hierarchical,        ///< node stage in shared memory + node aggregates between nodes
  shared_memory,       ///< all ranks on one node: shared segment or single copy
  distance_halving,    ///< recursive doubling, largest distance first (Sparbit's idea)
};

struct AlgorithmName {
  Algorithm id;
  std::string_view name;
  std::string_view summary;
};

inline constexpr std::array<AlgorithmName, 9> algorithm_table{{
    {Algorithm::automatic, "auto", "measured winner from the tuning file, else cost model's argmin"},
    {Algorithm::direct, "direct", "one round: send own block to all, receive from all"},
    {Algorithm::ring, "ring", "N-1 rounds to the right neighbour; bandwidth-optimal"},
    {Algorithm::neighbor_exchange, "neighbor_exchange",
     "N/2 rounds of two blocks with alternating neighbours; odd N folds one rank"},
    {Algorithm::recursive_doubling, "recursive_doubling",
     "log2 N rounds with partner rank^2^k; non-power-of-two N folds extra ranks"},
    {Algorithm::bruck, "bruck", "ceil(log2 N) rounds for any N, no final rotation"},
    {Algorithm::hierarchical, "hierarchical",
     "shared-memory node stage, node aggregates between nodes by a schedule (lib/hier)"},
    {Algorithm::shared_memory, "shared_memory",
     "one node: shared segment with flag sync, single copy for large blocks (lib/hier)"},
    {Algorithm::distance_halving, "distance_halving",
     "log2 N rounds, partner rank^(N/2^k): heavy rounds between near (same-node) ranks"},
}};

/// Name of an algorithm as used by AGX_ALGO and in every log line.
constexpr std::string_view to_string(Algorithm a) {
  for (const auto& e : algorithm_table)
    if (e.id == a) return e.name;
  return "unknown";
}

/// Parses a name from the table (exact match); nullopt when unknown.
constexpr std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (const auto& e : algorithm_table)
    if (e.name == name) return e.id;
  return std::nullopt;
}

}  // namespace agx
