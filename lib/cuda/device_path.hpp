#pragma once
// The one hook the dispatch calls (api/dispatch.cpp): device buffers take a device path.

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>
#include <mpi.h>

#include "cuda/settings.hpp"

#include <optional>

namespace agx {
class CommContext;
}

namespace agx::cuda {

/// One call's way through lib/cuda, decided without blocking. The constructor looks
/// at this rank's buffers and posts the agreement on memory kinds (one nonblocking
/// allreduce of three ints, only on communicators where some rank sees a GPU); test()
/// advances it and, once the ranks agree that some buffer is device memory, runs the
/// chosen device path whole. The first call on a communicator also agrees, once, on
/// whether any rank sees a GPU and on the settings that must match (AGX_CUDA,
/// AGX_CUDA_PATH, AGX_CUDA_CHUNK_BYTES), progressing agx's other requests meanwhile.
/// Without CUDA, or when no rank has a GPU, it is decided at once ("host") without any
/// MPI call after that first one. Callers settle it before their next call on the
/// communicator (run_if_device, and lib/core's starts through it), so agreements and
/// what follows them keep the order of the calls on every rank.
class DeviceCall {
 public:
  DeviceCall(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers, const Layout& layout);
  ~DeviceCall();
  DeviceCall(const DeviceCall&) = delete;
  DeviceCall& operator=(const DeviceCall&) = delete;

  /// nullopt while the agreement is open; then true when the device path ran (the call
  /// is complete), false when the caller runs the host path. Throws agx::Error.
  std::optional<bool> test();

 private:
  CommContext& ctx_;
  AlgorithmChoice choice_;
  Buffers buffers_;
  Layout layout_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int mine_[3] = {0, 0, 0};
  int agreed_[3] = {0, 0, 0};
  bool local_device_ = false;
  int device_ = -1;  ///< the caller's current CUDA device (the path runs on it)
  std::optional<bool> result_;
};

/// The blocking form: a DeviceCall tested until settled, every other running agx
/// request advancing meanwhile (so that requests started earlier cannot deadlock it).
/// True when the device path ran; false when the caller runs the host path.
bool run_if_device(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers, const Layout& layout);

/// The path of this process's last device call (for tools and tests).
std::optional<Path> last_path();

/// Runs the IPC path (ipc.cpp). False, on every rank, when some rank cannot take part
/// (nothing but the own block has moved then).
bool run_ipc(CommContext& ctx, const Buffers& buffers, const Layout& layout);

}  // namespace agx::cuda
