// Finding agx's interposer in the process and reading its counters.

#include "dropin.hpp"

#include <agx/algorithm.hpp>

#include <dlfcn.h>

namespace bench {

Interposer::Interposer()
    : calls_(reinterpret_cast<CallsFn>(dlsym(RTLD_DEFAULT, "agx_pmpi_calls"))),
      passthrough_(reinterpret_cast<PassthroughFn>(dlsym(RTLD_DEFAULT, "agx_pmpi_passthrough_calls"))) {}

Interposer::Counts Interposer::counts() const {
  Counts c;
  if (!loaded()) return c;
  for (const auto& info : agx::algorithms()) c.calls.push_back(calls_(std::string(info.name).c_str()));
  c.passthrough = passthrough_();
  return c;
}

std::string Interposer::took(const Counts& before, const Counts& after) const {
  if (!loaded() || before.calls.size() != after.calls.size()) return "";
  std::string name;
  unsigned long long agx_calls = 0;
  for (std::size_t i = 0; i < after.calls.size(); ++i) {
    const unsigned long long d = after.calls[i] - before.calls[i];
    agx_calls += d;
    if (d > 0) name = std::string(agx::algorithms()[i].name);
  }
  const unsigned long long passed = after.passthrough - before.passthrough;
  if (agx_calls == 1 && passed == 0) return name;
  if (agx_calls == 0 && passed == 1) return "mpi";
  return "";
}

}  // namespace bench
