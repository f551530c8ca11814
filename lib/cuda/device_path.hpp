#pragma once
// The one hook lib/core calls (core/allgather.cpp): device buffers take a device path.

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>

#include "cuda/settings.hpp"

#include <optional>

namespace agx {
class CommContext;
}

namespace agx::cuda {

/// Runs the call on a device path when any rank of the call has device (or managed)
/// buffers, and returns true; returns false when every rank's buffers are host memory
/// (the caller then runs the host path). `a` is the algorithm already chosen.
/// Collective over ctx when any rank of the communicator sees a GPU (one small
/// allreduce per call agrees on the memory kinds); without CUDA, or when no rank has a
/// GPU, it returns false at once, without any MPI call after the first.
bool run_if_device(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers, const Layout& layout);

/// The path of this process's last device call (for tools and tests).
std::optional<Path> last_path();

/// Runs the IPC path (ipc.cpp). False, on every rank, when some rank cannot take part
/// (nothing but the own block has moved then).
bool run_ipc(CommContext& ctx, const Buffers& buffers, const Layout& layout);

}  // namespace agx::cuda
