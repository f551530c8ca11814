// The registry (registry.hpp): the one table of algorithms. Adding an algorithm is its
// file (a planner and its accessor) plus one line here, and its id in
// include/agx/algorithm.hpp; everything else iterates this table.

#include "core/registry.hpp"

#include <agx/error.hpp>

#include <charconv>
#include <climits>

namespace agx {

// The planner accessors, one per algorithm file.
const Planner& direct_planner();
const Planner& ring_planner();
const Planner& neighbor_exchange_planner();
const Planner& recursive_doubling_planner();
const Planner& bruck_planner();
const Planner& distance_halving_planner();
const Planner& locality_bruck_planner();

namespace {

constexpr int bruck_radices[] = {2, 4, 8};
constexpr int group_sizes[] = {4, 8, 16};

// clang-format off
constexpr RegistryEntry entries[] = {
  {{Algorithm::automatic, "auto", "choose per call: measured winner from the tuning file, else the lowest predicted time", "", "", 0, {}, false},
   nullptr, "lib/core/select.cpp", "", ""},
  {{Algorithm::direct, "direct", "one round: send own block to all, receive from all", "", "none; meant for small N", 0, {}, true},
   &direct_planner, "lib/direct/direct.cpp", "1", "(N−1)·M in N−1 messages"},
  {{Algorithm::ring, "ring", "N−1 rounds to the right neighbour; bandwidth-optimal", "", "none", 0, {}, true},
   &ring_planner, "lib/ring/ring.cpp", "N−1", "(N−1)·M in N−1 messages"},
  {{Algorithm::neighbor_exchange, "neighbor_exchange", "N/2 rounds of two blocks with alternating neighbours; odd N folds one rank", "", "none", 0, {}, true},
   &neighbor_exchange_planner, "lib/ring/neighbor_exchange.cpp", "N/2 (even N); (N−1)/2 + 2 (odd N)", "(N−1)·M in N/2 messages"},
  {{Algorithm::recursive_doubling, "recursive_doubling", "log₂N rounds with partner rank XOR 2^k; non-power-of-two N folds the extra ranks", "", "none", 0, {}, true},
   &recursive_doubling_planner, "lib/rd/recursive_doubling.cpp", "log₂N (power of two); ⌊log₂N⌋ + 2", "(N−1)·M (+ (N−1)·M on the last hop when folded)"},
  {{Algorithm::bruck, "bruck", "radix-k Bruck: in round r send what you hold to k−1 peers rank − j·k^r; no final rotation", "k: radix, 2 or more (default 2; k ≥ N is one round)", "none", 2, bruck_radices, true},
   &bruck_planner, "lib/rd/bruck.cpp", "⌈log_k N⌉", "(N−1)·M in up to (k−1)·⌈log_k N⌉ messages"},
  {{Algorithm::hierarchical, "hierarchical", "node stage in shared memory, node aggregates between nodes by a schedule (lib/hier)", "", "more than one node, and fewer nodes than ranks", 0, {}, false},
   nullptr, "lib/hier/node_planner.cpp", "put; get of the own node's blocks while the inter-node schedule runs between leaders (I rounds); get of the rest: I + 2", "M into the segment; leader l: slice l of the node aggregates as the inter-node algorithm moves them (docs/hierarchy.md)"},
  {{Algorithm::shared_memory, "shared_memory", "one node: shared segment with flag sync, single copy for large blocks (lib/hier)", "", "all ranks on one node", 0, {}, false},
   nullptr, "lib/hier/node_planner.cpp", "2: put the own block, get the others", "no message: M into the segment, (N−1)·M out of it"},
  {{Algorithm::distance_halving, "distance_halving", "recursive doubling with partner rank XOR N/2^(k+1): the heavy rounds go to the nearest (same-node) ranks", "", "none", 0, {}, true},
   &distance_halving_planner, "lib/rd/distance_halving.cpp", "log₂N (power of two); ⌊log₂N⌋ + 2", "(N−1)·M (+ (N−1)·M on the last hop when folded)"},
  {{Algorithm::locality_bruck, "locality_bruck", "locality-aware Bruck: groups of k consecutive ranks, most rounds inside a group, one message per rank per step between groups (radix k+1 over groups)", "k: group size, 2 or more (default 8; k must divide N, else Bruck k=2)", "none", 8, group_sizes, true},
   &locality_bruck_planner, "lib/rd/locality_bruck.cpp", "1 + 2·⌈log_(k+1)(N/k)⌉", "(N−1)·M; between groups at most one message per step"},
};
// clang-format on

constexpr bool in_id_order() {
  for (std::size_t i = 0; i < std::size(entries); ++i)
    if (static_cast<std::size_t>(entries[i].info.id) != i) return false;
  return true;
}
static_assert(in_id_order(), "registry entries must be in the order of enum class Algorithm");

// point_to_point must be set exactly for the entries with a planner. (Checked by the
// unit test "registry entries are complete and agree with their planners", not by a
// static_assert: under -fsanitize GCC does not treat a function's address as a constant.)

// Concatenation without operator+ on temporaries (GCC 12 warns falsely on those, -Wrestrict).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s.append(p);
  return s;
}

std::string known_names() {
  std::string known;
  for (const auto& e : entries) known += std::string(known.empty() ? "" : ", ") + std::string(e.info.name);
  return known;
}

// The reason `c` is not valid, or empty.
std::string check(const AlgorithmChoice& c) {
  const AlgorithmInfo& info = algorithm_info(c.id);
  if (c.radix != 0 && info.default_radix == 0)
    return "algorithm '" + std::string(info.name) + "' takes no parameters";
  if (c.radix != 0 && c.radix < 2)
    return "k=" + std::to_string(c.radix) + " for '" + std::string(info.name) + "': the radix must be 2 or more";
  return {};
}

}  // namespace

std::span<const RegistryEntry> registry() { return entries; }

const RegistryEntry& registry_entry(Algorithm a) {
  const auto i = static_cast<std::size_t>(a);
  if (i >= std::size(entries))
    throw Error(MPI_ERR_ARG, "agx: algorithm id " + std::to_string(static_cast<int>(a)) + " is not registered");
  return entries[i];
}

std::span<const AlgorithmInfo> algorithms() {
  static const std::vector<AlgorithmInfo> infos = [] {
    std::vector<AlgorithmInfo> v;
    for (const auto& e : entries) v.push_back(e.info);
    return v;
  }();
  return infos;
}

const AlgorithmInfo& algorithm_info(Algorithm a) {
  registry_entry(a);  // throws for an id that is not registered
  return algorithms()[static_cast<std::size_t>(a)];
}

std::string_view to_string(Algorithm a) {
  const auto i = static_cast<std::size_t>(a);
  return i < std::size(entries) ? entries[i].info.name : "unknown";
}

std::string to_string(const AlgorithmChoice& c) {
  std::string s(to_string(c.id));
  const auto i = static_cast<std::size_t>(c.id);
  if (c.radix != 0 && i < std::size(entries) && c.radix != entries[i].info.default_radix)
    s += ":k=" + std::to_string(c.radix);
  return s;
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (const auto& e : entries)
    if (e.info.name == name) return e.info.id;
  return std::nullopt;
}

std::optional<AlgorithmChoice> parse_algorithm_choice(std::string_view text, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<AlgorithmChoice> {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  };
  const auto colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  const auto id = parse_algorithm(name);
  if (!id) return fail(cat({"'", name, "' names no algorithm (known: ", known_names(), ")"}));
  AlgorithmChoice c{*id, algorithm_info(*id).default_radix};
  if (colon == std::string_view::npos) return c;
  std::string_view rest = text.substr(colon + 1);
  if (algorithm_info(*id).default_radix == 0)
    return fail(cat({"algorithm '", name, "' takes no parameters"}));
  do {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      return fail(cat({"'", item, "' is not key=value (parameters of '", name, "': k)"}));
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key != "k")
      return fail(cat({"'", name, "' has no parameter '", key, "' (parameters: k)"}));
    long long v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc{} || end != value.data() + value.size() || value.empty())
      return fail(cat({"k='", value, "' is not a whole number"}));
    if (v < 2 || v > INT_MAX)
      return fail(cat({"k=", value, " for '", name, "': the radix must be 2 or more"}));
    c.radix = static_cast<int>(v);
  } while (!rest.empty());
  return c;
}

AlgorithmChoice resolve(AlgorithmChoice c) {
  if (const std::string problem = check(c); !problem.empty()) throw Error(MPI_ERR_ARG, "agx: " + problem);
  if (c.radix == 0) c.radix = algorithm_info(c.id).default_radix;
  return c;
}

std::vector<AlgorithmChoice> algorithm_variants() {
  std::vector<AlgorithmChoice> out;
  for (const auto& e : entries) {
    if (e.info.id == Algorithm::automatic) continue;
    if (e.info.radices.empty()) out.push_back({e.info.id, 0});
    for (int k : e.info.radices) out.push_back({e.info.id, k});
  }
  return out;
}

std::string registry_markdown() {
  std::string out =
      "| name (`AGX_ALGO`) | parameters | file | rounds | bytes sent per rank | restrictions | summary |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const auto& e : entries) {
    const AlgorithmInfo& i = e.info;
    std::string variants;
    for (int k : i.radices)
      if (k != i.default_radix) variants += std::string(variants.empty() ? "" : ", ") + "`" + to_string(AlgorithmChoice{i.id, k}) + "`";
    std::string params(i.parameters);
    if (!variants.empty()) params += "; `auto` also weighs " + variants;
    auto cell = [](std::string_view s) { return s.empty() ? std::string("—") : std::string(s); };
    out += "| `" + std::string(i.name) + "` | " + cell(params) + " | `" + std::string(e.file) + "` | " +
           cell(e.rounds) + " | " + cell(e.bytes) + " | " + cell(i.restrictions) + " | " +
           std::string(i.summary) + " |\n";
  }
  return out;
}

}  // namespace agx
