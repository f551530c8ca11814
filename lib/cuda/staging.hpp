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
#include <memory>

namespace agx::cuda {

struct StagingSettings {
  /// Largest MPI message: every rank of the call must use the same value.
  std::size_t piece_bytes = std::size_t{1} << 20;
  /// Own block device->host chunk; local, any value works.
  std::size_t chunk_bytes = std::size_t{1} << 20;
};

/// One staging call, advanced without blocking on peers: the constructor stages the
/// own block in and posts the first round; test() advances the rounds (the only waits
/// are local ones, for own-block chunks on their way to the host) and returns true
/// once the receive buffer is complete. `schedule` must outlive the call. Throws
/// agx::Error (after the abandon path: the communicator is marked).
class StagingCall {
 public:
  StagingCall(DeviceOps& ops, PinnedPool& pool, const Schedule& schedule, const Buffers& device,
              const Layout& layout, MPI_Comm comm, int tag, const StagingSettings& settings);
  ~StagingCall();
  StagingCall(const StagingCall&) = delete;
  StagingCall& operator=(const StagingCall&) = delete;
  bool test();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// The mirror of a call whose algorithm is not a schedule (lib/hier): the constructor
/// stages the own block in (and waits for it); the algorithm runs in place on
/// mirror(); finish() copies every other block to the device and waits.
class StagedMirror {
 public:
  StagedMirror(DeviceOps& ops, PinnedPool& pool, int rank, const Buffers& device,
               const Layout& layout, const StagingSettings& settings);
  ~StagedMirror();
  StagedMirror(const StagedMirror&) = delete;
  StagedMirror& operator=(const StagedMirror&) = delete;
  const Buffers& mirror() const;
  void finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
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
