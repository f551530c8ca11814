// The device path cost model (see path_cost.hpp).

#include "cuda/path_cost.hpp"

#include <algorithm>

namespace agx::cuda {

LevelCost device_level(const PathCostParams& c) { return LevelCost{c.copy_alpha_s, c.pcie_s_per_byte}; }
LevelCost device_peer_level(const PathCostParams& c) { return LevelCost{c.ipc_round_alpha_s, c.peer_s_per_byte}; }

double predict_path(Path p, const ScheduleTimes& t, const Layout&, const PathCostParams& c) {
  switch (p) {
    case Path::aware: return t.schedule_s * c.aware_factor + c.aware_alpha_s;
    case Path::staging: return t.staged_s;
    case Path::ipc: return c.ipc_alpha_s + t.ipc_s;
  }
  return t.schedule_s;
}

Path choose_path(const PathOptions& allowed, const ScheduleTimes& t, const Layout& layout,
                 const PathCostParams& c) {
  Path best = Path::staging;
  double best_s = predict_path(Path::staging, t, layout, c);
  for (Path p : {Path::aware, Path::ipc}) {
    if ((p == Path::aware && !allowed.aware) || (p == Path::ipc && !allowed.ipc)) continue;
    const double s = predict_path(p, t, layout, c);
    if (s < best_s) best_s = s, best = p;
  }
  return best;
}

}  // namespace agx::cuda
