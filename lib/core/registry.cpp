// The registry (registry.hpp): the one table of algorithms, made from the registry's data,
// include/agx/algorithms.def (one entry per algorithm), plus `auto`. Adding an algorithm is
// its file (a planner and its accessor) plus one entry there; everything else iterates
// this table.

#include "core/registry.hpp"

#include <agx/error.hpp>

#include <charconv>
#include <climits>
#include <initializer_list>

namespace agx {

// The planner accessors, one per algorithm file: `const Planner& ring_planner();`, ...
#define AGX_PLANNER(id, ...) const Planner& id##_planner();
#define AGX_NODE_PATH(...)
#include <agx/algorithms.def>
#undef AGX_PLANNER
#undef AGX_NODE_PATH

namespace {

#define AGX_UNPAREN(...) __VA_ARGS__

// The radices of each algorithm: `ring_radices` (empty), `bruck_radices` {2, 4, 8}, ...
#define AGX_PLANNER(id, file, default_radix, radices, ...) \
  constexpr std::initializer_list<int> id##_radices = {AGX_UNPAREN radices};
#define AGX_NODE_PATH AGX_PLANNER  // the same for both kinds
#include <agx/algorithms.def>
#undef AGX_PLANNER
#undef AGX_NODE_PATH

constexpr std::span<const int> span_of(std::initializer_list<int> l) { return {l.begin(), l.size()}; }

// One entry per algorithm: the id is the name; the planner is `id_planner` for a
// point-to-point schedule, none for a path lib/hier runs itself.
#define AGX_ENTRY(id, file, default_radix, radices, summary, parameters, restrictions, rounds, bytes, p2p, planner) \
  {{Algorithm::id, #id, summary, parameters, restrictions, default_radix, span_of(id##_radices), p2p}, \
   planner, file, rounds, bytes},
#define AGX_PLANNER(id, ...) AGX_ENTRY(id, __VA_ARGS__, true, &id##_planner)
#define AGX_NODE_PATH(id, ...) AGX_ENTRY(id, __VA_ARGS__, false, nullptr)

constexpr RegistryEntry entries[] = {
  {{Algorithm::automatic, "auto", "choose per call: measured winner from the tuning file, else the lowest predicted time", "", "", 0, {}, false},
   nullptr, "lib/core/select.cpp", "", ""},
#include <agx/algorithms.def>
};

#undef AGX_PLANNER
#undef AGX_NODE_PATH
#undef AGX_ENTRY
#undef AGX_UNPAREN

constexpr bool in_id_order() {
  for (std::size_t i = 0; i < std::size(entries); ++i)
    if (static_cast<std::size_t>(entries[i].info.id) != i) return false;
  return true;
}
// True by construction (the enum and this table read the same file); a guard for `auto`.
static_assert(in_id_order(), "registry entries must be in the order of enum class Algorithm");

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

std::string full_name(const AlgorithmChoice& c) {
  std::string s(to_string(c.id));
  const auto i = static_cast<std::size_t>(c.id);
  if (i < std::size(entries) && entries[i].info.default_radix != 0)
    s += ":k=" + std::to_string(c.radix != 0 ? c.radix : entries[i].info.default_radix);
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
