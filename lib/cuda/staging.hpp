#pragma once
// The staging path (docs/gpu.md): the staged schedule (stage_on_device: the host
// schedule with its device-level copies) runs on a pinned host mirror of the receive
// buffer. The own block goes device->host in chunks, and each send that carries
// it is posted as soon as the chunks it covers have arrived on the host; every received
// message goes host->device as soon as it arrives, alternating between two streams, so
// copies and messages overlap. The call returns when every copy has completed.
//
// The rounds run on the round engine (core/executor.hpp) over the mirror, from the
// compiled message descriptors, with the engine's AGX_TIMEOUT, AGX_INTEGRITY and abandon
// path; the engine runs the schedule's device copies through staging (DeviceCopies: the
// own copy, the own block's to_host and the wait before a send, each receive's
// to_device). So on the wire it is exactly a host call
// with the same piece size, and ranks with host buffers may take part in the same call.
// Written only against DeviceOps: the same code runs on CUDA (cuda_ops.cu) and on the
// test seam (test/cuda/seam_ops.hpp).

#include <mpi.h>

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include "core/integrity.hpp"
#include "core/schedule.hpp"
#include "cuda/device_ops.hpp"
#include "cuda/pinned_pool.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace agx {
class CommContext;
}

namespace agx::cuda {

struct StagingSettings {
  /// Largest MPI message: every rank of the call must use the same value.
  std::size_t piece_bytes = std::size_t{1} << 20;
  /// Own block device->host chunk; local, any value works.
  std::size_t chunk_bytes = std::size_t{1} << 20;
  /// Most bytes of a call's pinned mirror (AGX_CUDA_STAGING_BYTES): a call whose blocks
  /// do not fit is cut into slices (below). Every rank of the call must use the same.
  std::size_t mirror_bytes = std::size_t{64} << 20;
};

/// A staging call runs as `slice_count` slices, one after the other; slice j gathers
/// bytes [j*stride, (j+1)*stride) of every block, each with the call's schedule. On the
/// mirror, block b of a slice lies at b*stride, so the mirror is nranks*stride bytes:
/// stride is the largest block when nranks*largest fits in mirror_bytes (one slice),
/// else mirror_bytes/nranks. The same on every rank (it depends on block sizes only).
struct Slicing {
  std::size_t stride = 0;
  std::size_t slices = 1;
};
Slicing slicing_of(const Layout& layout, std::size_t mirror_bytes);

/// One slice's layouts: `device` places its pieces in the caller's receive buffer (the
/// caller's offsets), `mirror` on the mirror; `send_shift` is where the own block's
/// piece starts in the send buffer.
struct Slice {
  Slice(const Layout& layout, const Slicing& s, std::size_t j);
  Slice(const Slice&) = delete;
  Slice& operator=(const Slice&) = delete;
  std::vector<std::size_t> bytes, device_offsets, mirror_offsets;
  Layout device, mirror;
  std::size_t send_shift = 0;
};

struct SlicedCall;

/// One staging call, advanced without blocking on peers, slice after slice (the pinned
/// mirror is at most settings.mirror_bytes): the constructor stages the own block in
/// and posts the first round; test() advances the rounds (the only waits
/// are local ones, for own-block chunks on their way to the host) and returns true
/// once the receive buffer is complete. `checks` as for a host call (every rank of the
/// call alike). `schedule` is staged (stage_on_device) and must outlive the call.
/// Throws agx::Error (after the abandon
/// path: the communicator is marked).
class StagingCall {
 public:
  StagingCall(DeviceOps& ops, PinnedPool& pool, const Schedule& schedule, const Buffers& device,
              const Layout& layout, MPI_Comm comm, int tag, const StagingSettings& settings,
              const Checks& checks = {});
  ~StagingCall();
  StagingCall(const StagingCall&) = delete;
  StagingCall& operator=(const StagingCall&) = delete;
  bool test();

 private:
  std::unique_ptr<SlicedCall> s_;
};

/// A rank with host buffers in a staging call: the host executor on its own buffers,
/// slice after slice as StagingCall cuts them, so the messages are the same.
class HostStagingCall {
 public:
  HostStagingCall(const Schedule& schedule, const Buffers& host, const Layout& layout, MPI_Comm comm,
                  int tag, const StagingSettings& settings, const Checks& checks = {});
  ~HostStagingCall();
  HostStagingCall(const HostStagingCall&) = delete;
  HostStagingCall& operator=(const HostStagingCall&) = delete;
  bool test();

 private:
  std::unique_ptr<SlicedCall> s_;
};

/// A node algorithm (lib/hier: shared_memory, hierarchical) on device buffers: its node
/// schedule staged (stage_on_device) on the round engine (hier::start_node_call with
/// Staging as its device copies), over a pinned mirror of the whole receive buffer
/// (lib/hier's schedules take whole blocks; device_path.cpp runs a point-to-point
/// schedule instead when the mirror would exceed the staging bound). Round 0 stages the
/// own block in (the put waits for it) and makes the own copy on the device; each block
/// a get copies onto the mirror goes on to the device at once. Started at once, advanced
/// by test() without blocking on peers; true once the receive buffer is complete.
/// Every rank of the call runs a node call of `a` (host ranks hier::start_node_call).
class StagedNodeCall {
 public:
  StagedNodeCall(DeviceOps& ops, PinnedPool& pool, CommContext& ctx, Algorithm a,
                 const Buffers& device, const Layout& layout, const StagingSettings& settings);
  ~StagedNodeCall();
  StagedNodeCall(const StagedNodeCall&) = delete;
  StagedNodeCall& operator=(const StagedNodeCall&) = delete;
  bool test();

 private:
  struct State;
  std::unique_ptr<State> s_;
  bool done_ = false;
};

/// Runs this rank's staged `schedule` with device buffers `device` (send and recv, or recv
/// in place) through a pinned mirror from `pool`. Blocking; throws agx::Error.
void run_staging(DeviceOps& ops, PinnedPool& pool, const Schedule& schedule,
                 const Buffers& device, const Layout& layout, MPI_Comm comm, int tag,
                 const StagingSettings& settings, const Checks& checks = {});

}  // namespace agx::cuda
