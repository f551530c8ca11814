// Choosing the algorithm for a call: explicit option, then AGX_ALGO, then the rule.
//
// The rule (until calibrated selection lands): with S = total bytes gathered per rank,
//   N == 1                      -> direct (nothing to send)
//   S <= 64 KiB, N power of 2   -> recursive_doubling   (log2 N rounds)
//   S <= 64 KiB, otherwise      -> bruck                (ceil(log2 N) rounds)
//   larger, N even              -> neighbor_exchange    (N/2 rounds, bandwidth-optimal)
//   larger, N odd               -> ring                 (N-1 rounds, bandwidth-optimal)
// These mirror the thresholds the MPI libraries use for small/large all-gathers.

#include <agx/bytes.hpp>
#include <agx/error.hpp>

#include "core/config.hpp"
#include "core/planner.hpp"

#include <string>

namespace agx {
namespace {

constexpr std::size_t small_total_bytes = 64 * 1024;

std::size_t total_bytes(const Layout& layout) {
  std::size_t total = 0;
  for (int b = 0; b < layout.nranks(); ++b) total += layout.bytes(b);
  return total;
}

Algorithm by_rule(int nranks, const Layout& layout) {
  if (nranks == 1) return Algorithm::direct;
  const bool power_of_two = (nranks & (nranks - 1)) == 0;
  if (total_bytes(layout) <= small_total_bytes)
    return power_of_two ? Algorithm::recursive_doubling : Algorithm::bruck;
  return nranks % 2 == 0 ? Algorithm::neighbor_exchange : Algorithm::ring;
}

}  // namespace

Algorithm choose_algorithm(int nranks, const Layout& layout, const Options& options) {
  Algorithm a = options.algorithm;
  if (a == Algorithm::automatic) {
    const Config& c = config();
    if (!c.invalid_algo.empty()) {
      std::string known;
      for (const auto& e : algorithm_table) known += std::string(known.empty() ? "" : ", ") + std::string(e.name);
      throw Error(MPI_ERR_ARG, "agx: AGX_ALGO='" + c.invalid_algo + "' names no algorithm (known: " + known + ")");
    }
    if (c.forced) a = *c.forced;
  }
  if (a == Algorithm::automatic) return by_rule(nranks, layout);
  // Not schedules of their own: lib/hier checks them against the topology at the call.
  if (a == Algorithm::hierarchical || a == Algorithm::shared_memory) return a;
  const std::string why = planner_for(a).unsupported_reason({nranks, 0});
  if (!why.empty())
    throw Error(MPI_ERR_ARG, "agx: algorithm '" + std::string(to_string(a)) + "' cannot serve this call: " + why);
  return a;
}

}  // namespace agx
