// Reading the hierarchical settings from the environment (settings.hpp).

#include "hier/settings.hpp"

#include <cstdlib>
#include <string>

namespace agx::hier {
namespace {

std::optional<unsigned long long> number(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0') return std::nullopt;
  return v;
}

Settings read_environment() {
  Settings s;
  if (const char* inter = std::getenv("AGX_HIER_INTER"); inter != nullptr && *inter != '\0') {
    const auto a = parse_algorithm_choice(inter);
    if (a && a->id != Algorithm::automatic && a->id != Algorithm::hierarchical &&
        a->id != Algorithm::shared_memory)
      s.inter = *a;
    else if (!a || a->id != Algorithm::automatic)
      s.invalid_inter = inter;
  }
  if (auto v = number("AGX_HIER_LEADERS"); v && *v >= 1 && *v <= 1024) s.leaders = static_cast<int>(*v);
  if (auto v = number("AGX_SHM_CHUNK_BYTES"); v && *v >= 4096 && *v <= (1ull << 30))
    s.chunk_bytes = *v, s.chunk_set = true;
  if (auto v = number("AGX_CMA"); v) s.cma = *v != 0;
  if (auto v = number("AGX_CMA_MIN_BYTES"); v) s.cma_min_bytes = *v;
  if (const char* w = std::getenv("AGX_WAIT"); w != nullptr && *w != '\0') {
    const std::string text = w;
    if (text == "auto") s.wait = Settings::Wait::automatic;
    else if (text == "yield") s.wait = Settings::Wait::yield;
    else if (text == "sleep") s.wait = Settings::Wait::sleep;
    else s.invalid_wait = text;
  }
  if (const char* d = std::getenv("AGX_NODE_DETECT"); d != nullptr && *d != '\0') {
    const std::string text = d;
    if (text == "mpi") s.node_detect_mpi = true;
    else if (text != "host") s.invalid_node_detect = text;
  }
  if (const char* t = std::getenv("AGX_VIRTUAL_NODES"); t != nullptr) s.virtual_nodes = t;
  if (const char* t = std::getenv("AGX_VIRTUAL_NODE_SIZE"); t != nullptr) s.virtual_node_size = t;
  return s;
}

}  // namespace

const Settings& settings() {
  static const Settings s = read_environment();
  return s;
}

}  // namespace agx::hier
