// The CUDA IPC path inside one node (docs/gpu.md):
//   1. each rank puts its own block in place in its device receive buffer and records
//      its interprocess "ready" event on its stream;
//   2. a nonblocking allgather exchanges (receive allocation handle, own block offset
//      in it, event handle);
//   3. each rank opens its peers' handles (cached per handle in backend) and the ranks
//      agree (a nonblocking allreduce) that every open worked, else all fall back to
//      staging;
//   4. for each peer: the stream waits for the peer's ready event, then copies the
//      peer's own block device-to-device straight out of the peer's receive buffer
//      (the mappings are looked up again here: an overlapping call may have evicted
//      them since step 3), and the copies are waited for (local);
//   5. a nonblocking barrier: no rank completes (and lets its caller reuse the receive
//      buffer) while a peer may still read from it.
// PMPI_ entry points: the interposer must not see agx's own collectives.

#include "cuda/ipc.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/mpi_check.hpp"
#include "cuda/device_path.hpp"

#include <sched.h>

namespace agx::cuda {

IpcCall::IpcCall(CommContext& ctx, const Buffers& buffers, const Layout& layout)
    : ctx_(ctx), buffers_(buffers), layout_(layout) {
  const int me = ctx.rank();
  mine_.ok = backend::ipc_begin(buffers.send, buffers.recv, buffers.in_place, layout.offset(me),
                                layout.bytes(me), mine_)
                 ? 1
                 : 0;
  all_.resize(static_cast<std::size_t>(ctx.size()));
  check_mpi(PMPI_Iallgather(&mine_, sizeof mine_, MPI_BYTE, all_.data(), sizeof mine_, MPI_BYTE,
                            ctx.comm(), &request_),
            "MPI_Iallgather");
}

IpcCall::~IpcCall() {
  // A collective request cannot be cancelled; every rank posted it (an exception
  // elsewhere left it open).
  if (request_ != MPI_REQUEST_NULL) PMPI_Wait(&request_, MPI_STATUS_IGNORE);
}

bool IpcCall::copy_all() {
  const int n = ctx_.size(), me = ctx_.rank();
  auto* recv = static_cast<std::byte*>(buffers_.recv);
  for (int p = 0; p < n; ++p) {
    if (p == me || layout_.bytes(p) == 0) continue;
    const backend::IpcPeer peer = backend::ipc_open(all_[static_cast<std::size_t>(p)]);
    if (peer.base == nullptr)
      throw Error(MPI_ERR_OTHER, "agx: CUDA IPC: a peer's buffer, mapped a moment ago, cannot be "
                                 "mapped again");
    // The peer's own block where the peer put it (its displacements, not ours).
    backend::ipc_copy(recv + layout_.offset(p), peer.base, layout_.bytes(p), peer);
  }
  backend::ipc_finish();
  return true;
}

std::optional<bool> IpcCall::test() {
  for (;;) {
    if (request_ != MPI_REQUEST_NULL) {
      int done = 0;
      check_mpi(PMPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) return std::nullopt;
    }
    switch (step_) {
      case 0: {  // handles exchanged: open them, agree that every open worked
        const int n = ctx_.size(), me = ctx_.rank();
        for (const auto& e : all_) ok_ = ok_ && e.ok;
        for (int p = 0; p < n && ok_; ++p) {
          if (p == me || layout_.bytes(p) == 0) continue;
          ok_ = backend::ipc_open(all_[static_cast<std::size_t>(p)]).base != nullptr;
        }
        check_mpi(PMPI_Iallreduce(&ok_, &agreed_, 1, MPI_INT, MPI_MIN, ctx_.comm(), &request_),
                  "MPI_Iallreduce");
        step_ = 1;
        break;
      }
      case 1:
        if (!agreed_) {
          backend::ipc_finish();
          step_ = 3;
          return false;
        }
        copy_all();
        check_mpi(PMPI_Ibarrier(ctx_.comm(), &request_), "MPI_Ibarrier");
        step_ = 2;
        break;
      case 2:
        step_ = 3;
        return true;
      default:
        return agreed_ != 0;
    }
  }
}

bool run_ipc(CommContext& ctx, const Buffers& buffers, const Layout& layout) {
  IpcCall call(ctx, buffers, layout);
  for (;;) {
    if (const std::optional<bool> done = call.test()) return *done;
    sched_yield();
  }
}

}  // namespace agx::cuda
