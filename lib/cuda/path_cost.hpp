#pragma once
// Choosing the device path of a call with a small cost model (docs/gpu.md):
//   aware:   t_schedule * aware_factor + aware_alpha        (MPI moves device memory)
//   staging: t_staged, the core cost model's price of the staged schedule
//            (stage_on_device: its device copies are operations, priced at copy_alpha
//            and pcie beside the rounds, core/cost_model.hpp); a node algorithm's node
//            schedule staged the same way (its puts wait for the own block's to_host,
//            its gets' blocks go to the device as they arrive)
//   ipc:     ipc_alpha + t_ipc, the core cost model's price of the IPC schedule
//            (shared_memory's single copy at the device level, predict_ipc: the own
//            copy on the device, rounds of ipc_round_alpha, the reads at peer bandwidth);
//            ipc_alpha is the handle exchange and agreement before it
// Every input is the same on every rank, so every rank picks the same path.
// t_schedule is the core cost model's prediction of the host schedule. The constants
// are uncalibrated defaults for an H100/H200-class node; scripts/gpu-check.sh measures
// the real paths. Only paths that can serve the call are compared.

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include "core/cost_model.hpp"

#include "cuda/settings.hpp"

#include <cstddef>

namespace agx::cuda {

struct PathCostParams {
  double aware_factor = 1.2;
  double aware_alpha_s = 5e-6;
  double copy_alpha_s = 8e-6;
  double pcie_s_per_byte = 1.0 / 25e9;
  double ipc_alpha_s = 24e-6;       ///< the handle exchange and agreement (outside the schedule)
  double ipc_round_alpha_s = 2e-6;  ///< a round of the IPC schedule (an event, a barrier)
  double peer_s_per_byte = 1.0 / 150e9;
};

/// What can serve the call (agreed over all ranks).
struct PathOptions {
  bool aware = false;  ///< every rank's MPI library is CUDA-aware
  bool ipc = false;    ///< one node and every receive buffer is device memory
};

/// The core cost model's device level from these constants (CostParams::device).
LevelCost device_level(const PathCostParams& c = {});
/// The core cost model's device-level node operations (CostParams::device_peer).
LevelCost device_peer_level(const PathCostParams& c = {});

/// What the paths are priced from: the host schedule's prediction, the staged
/// schedule's (predict_staged) and the IPC schedule's (predict_ipc; only read where the
/// IPC path is allowed).
struct ScheduleTimes {
  double schedule_s = 0;
  double staged_s = 0;
  double ipc_s = 0;
};

/// Predicted seconds of `p` for the call.
double predict_path(Path p, const ScheduleTimes& t, const Layout& layout, const PathCostParams& c = {});

/// The cheapest path among those allowed (staging is always allowed).
Path choose_path(const PathOptions& allowed, const ScheduleTimes& t, const Layout& layout,
                 const PathCostParams& c = {});

}  // namespace agx::cuda
