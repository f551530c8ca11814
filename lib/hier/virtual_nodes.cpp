// Parsing of AGX_VIRTUAL_NODE_SIZE and AGX_VIRTUAL_NODES (see virtual_nodes.hpp).

#include "hier/virtual_nodes.hpp"

#include "hier/settings.hpp"

#include <agx/error.hpp>

#include <cstdlib>
#include <vector>

namespace agx::hier {
namespace {

[[noreturn]] void bad(const std::string& name, const std::string& text, const char* why) {
  throw Error(MPI_ERR_ARG, "agx: " + name + "='" + text + "': " + why);
}

std::vector<int> numbers(const std::string& text, char sep, const std::string& name) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(sep, at), text.size());
    const std::string item = text.substr(at, end - at);
    char* stop = nullptr;
    const long v = std::strtol(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || v < 0 || v > 1'000'000) bad(name, text, "expects non-negative integers");
    out.push_back(static_cast<int>(v));
    at = end + 1;
  }
  return out;
}

}  // namespace

VirtualRule virtual_node_rule(int rank, std::string& setting) {
  setting.clear();
  const Settings& s = settings();  // the texts, read once per process
  if (!s.virtual_nodes.empty()) {
    const std::string& text = s.virtual_nodes;
    const std::string name = "AGX_VIRTUAL_NODES";
    setting = name + "=" + text;
    if (text.rfind("rr:", 0) == 0) {
      const std::vector<int> k = numbers(text.substr(3), ',', name);
      if (k.size() != 1 || k[0] < 1) bad(name, text, "rr:k needs k >= 1");
      return {rank % k[0], 0};
    }
    if (text.find('+') != std::string::npos || text.find(',') == std::string::npos) {
      const std::vector<int> sizes = numbers(text, '+', name);
      int sum = 0;
      for (int s : sizes) {
        if (s < 1) bad(name, text, "group sizes must be >= 1");
        sum += s;
      }
      const int cycle = rank / sum;
      int at = rank % sum;
      for (std::size_t g = 0; g < sizes.size(); ++g) {
        if (at < sizes[g]) return {cycle * static_cast<int>(sizes.size()) + static_cast<int>(g), 0};
        at -= sizes[g];
      }
    }
    const std::vector<int> labels = numbers(text, ',', name);
    return {labels[static_cast<std::size_t>(rank) % labels.size()], 0};
  }
  if (!s.virtual_node_size.empty()) {
    const std::string& text = s.virtual_node_size;
    const std::string name = "AGX_VIRTUAL_NODE_SIZE";
    const std::vector<int> v = numbers(text, ',', name);
    if (v.size() != 1 || v[0] < 1) bad(name, text, "expects one integer >= 1");
    setting = name + "=" + text;
    return {0, v[0]};
  }
  return {};
}

}  // namespace agx::hier
