#pragma once
// The registry: one entry per algorithm (id, name, summary, parameters, restrictions,
// planner) that the selector, AGX_ALGO, the tools, the tests and the generated table of
// docs/algorithms.md iterate. "How to add an algorithm" is in docs/algorithms.md.

#include <agx/algorithm.hpp>

#include "core/planner.hpp"

#include <span>
#include <string_view>

namespace agx {

struct RegistryEntry {
  AlgorithmInfo info;
  /// The planner; null for `auto` and for the paths lib/hier runs itself.
  const Planner& (*planner)() = nullptr;
  // For the generated table of docs/algorithms.md:
  std::string_view file;    ///< where it lives
  std::string_view rounds;  ///< rounds of the schedule, N ranks
  std::string_view bytes;   ///< bytes sent per rank, M bytes per block
};

/// Every entry, in id order (`auto` first).
std::span<const RegistryEntry> registry();

/// The entry of `a`.
const RegistryEntry& registry_entry(Algorithm a);

/// `c` with its parameters checked and the default radix filled in; throws agx::Error
/// (MPI_ERR_ARG) naming the problem (a radix for an algorithm without one, k < 2).
AlgorithmChoice resolve(AlgorithmChoice c);

/// The registry as a markdown table (docs/algorithms.md, between its markers).
std::string registry_markdown();

}  // namespace agx
