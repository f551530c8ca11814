#pragma once
// The staging path (docs/gpu.md): the host schedule runs on a pinned host mirror of the
// receive buffer. The own block goes device->host in chunks, and each send that carries
// it is posted as soon as the chunks it covers have arrived on the host; every received
// message goes host->device as soon as it arrives, alternating between two streams, so
// copies and messages overlap. The call returns when every copy has completed.
//
// Written only against DeviceOps: the same code runs on CUDA (cuda_ops.cu) and on the
// test seam (test/cuda/seam_ops.hpp). On the wire it is exactly the host executor with
// the same piece size, so ranks with host buffers may take part in the same call.

#include <mpi.h>

#include <agx/bytes.hpp>

#include "core/schedule.hpp"
#include "cuda/device_ops.hpp"
#include "cuda/pinned_pool.hpp"

#include <cstddef>
#include <functional>

namespace agx::cuda {

struct StagingSettings {
  /// Largest MPI message: every rank of the call must use the same value.
  std::size_t piece_bytes = std::size_t{1} << 20;
  /// Own block device->host chunk; local, any value works.
  std::size_t chunk_bytes = std::size_t{1} << 20;
};

/// Runs this rank's `schedule` with device buffers `device` (send and recv, or recv
/// in place) through a pinned mirror from `pool`. Blocking; throws agx::Error.
void run_staging(DeviceOps& ops, PinnedPool& pool, const Schedule& schedule,
                 const Buffers& device, const Layout& layout, MPI_Comm comm, int tag,
                 const StagingSettings& settings);

/// The same around an algorithm that is not a schedule (lib/hier): the own block is
/// staged in, `host_run` runs in place on the mirror, then every other block is copied
/// to the device.
void run_staged(DeviceOps& ops, PinnedPool& pool, int rank, const Buffers& device,
                const Layout& layout, const StagingSettings& settings,
                const std::function<void(const Buffers& mirror)>& host_run);

}  // namespace agx::cuda
