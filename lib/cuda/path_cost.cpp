// The device path cost model (see path_cost.hpp).

#include "cuda/path_cost.hpp"

#include <algorithm>

namespace agx::cuda {

double predict_path(Path p, double schedule_s, const Layout& layout,
                    std::size_t piece_bytes, const PathCostParams& c) {
  std::size_t total = 0, largest = 0;
  for (int b = 0; b < layout.nranks(); ++b) {
    total += layout.bytes(b);
    largest = std::max(largest, layout.bytes(b));
  }
  const auto first = static_cast<double>(std::min(largest, piece_bytes));
  switch (p) {
    case Path::aware: return schedule_s * c.aware_factor + c.aware_alpha_s;
    case Path::staging:
      return schedule_s + 2 * c.copy_alpha_s +
             2 * first * c.pcie_s_per_byte;
    case Path::ipc: return c.ipc_alpha_s + static_cast<double>(total) * c.peer_s_per_byte;
  }
  return schedule_s;
}

Path choose_path(const PathOptions& allowed, double schedule_s, const Layout& layout,
                 std::size_t piece_bytes, const PathCostParams& c) {
  Path best = Path::staging;
  double best_s = predict_path(Path::staging, schedule_s, layout, piece_bytes, c);
  for (Path p : {Path::aware, Path::ipc}) {
    if ((p == Path::aware && !allowed.aware) || (p == Path::ipc && !allowed.ipc)) continue;
    const double s = predict_path(p, schedule_s, layout, piece_bytes, c);
    if (s < best_s) best_s = s, best = p;
  }
  return best;
}

}  // namespace agx::cuda
