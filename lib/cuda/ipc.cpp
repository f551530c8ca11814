// The CUDA IPC path inside one node (docs/gpu.md): shared_memory's single-copy schedule
// at the device level (NodeShape::device_ipc), run by the round engine on IpcSegment:
//   round 0   copy~device: the IPC stream waits for the caller's legacy stream, then
//             copies the own block into its place in the device receive buffer
//   round 1   expose~device + signal~device: records the interprocess "ready" event on
//             that stream (after the copy), exports the receive allocation and posts a
//             nonblocking allgather of (allocation handle, own block offset, event handle)
//   round 2   wait~device + read~device: once the handles are in, opens the peers' (cached
//             per handle in backend) and the ranks agree (a nonblocking allreduce) that
//             every open worked, else all fall back to staging with nothing but the own
//             block moved; then for each peer the stream waits for the peer's ready event
//             and copies the peer's own block device-to-device straight out of the peer's
//             receive buffer (the mappings looked up again here: an overlapping call may
//             have evicted them since), and the copies are waited for (local)
//   round 3   release~device: a nonblocking barrier: no rank completes (and lets its
//             caller reuse the receive buffer) while a peer may still read from it
// The handle exchange is what carries the signal to the readers: its allgather is posted
// after the event is recorded, so a reader's stream never waits on an earlier recording.
// PMPI_ entry points: the interposer must not see agx's own collectives.

#include "cuda/ipc.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/planner.hpp"

namespace agx::cuda {
namespace {

[[noreturn]] void not_ipc(const char* what) {
  throw Error(MPI_ERR_INTERN, std::string("agx: the CUDA IPC schedule has no ") + what);
}

Schedule ipc_schedule(int n, int rank) {
  NodeShape shape;
  shape.node_of.assign(static_cast<std::size_t>(n), 0);
  shape.device_ipc = true;
  return plan_node_algorithm(Algorithm::shared_memory, shape, rank);
}

}  // namespace

IpcSegment::IpcSegment(CommContext& ctx, const Buffers& buffers, const Layout& layout)
    : ctx_(ctx), buffers_(buffers), layout_(layout) {}

IpcSegment::~IpcSegment() {
  // A collective request cannot be cancelled; every rank posted it (an exception
  // elsewhere left it open): waited for, unless the call failed (an AGX_TIMEOUT stall, a
  // peer that cannot be mapped again), where a peer may never complete it: freed then.
  if (request_ == MPI_REQUEST_NULL) return;
  if (abandoned_) PMPI_Request_free(&request_);
  else PMPI_Wait(&request_, MPI_STATUS_IGNORE);
}

bool IpcSegment::test_request() {
  if (request_ == MPI_REQUEST_NULL) return true;
  int done = 0;
  check_mpi(PMPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

void IpcSegment::copy_own() {
  const int me = ctx_.rank();
  backend::ipc_copy_own(buffers_.in_place ? nullptr : buffers_.send,
                        static_cast<std::byte*>(buffers_.recv) + layout_.offset(me), layout_.bytes(me));
}

void IpcSegment::expose(const NodeOp&, const Buffers&, const Layout&, bool signal) {
  if (!signal) not_ipc("expose without its signal (the exchange is both)");
  const int me = ctx_.rank();
  mine_.ok = backend::ipc_expose(buffers_.recv, layout_.offset(me), mine_) ? 1 : 0;
  all_.resize(static_cast<std::size_t>(ctx_.size()));
  check_mpi(PMPI_Iallgather(&mine_, sizeof mine_, MPI_BYTE, all_.data(), sizeof mine_, MPI_BYTE,
                            ctx_.comm(), &request_),
            "MPI_Iallgather");
}

bool IpcSegment::try_read(const NodeOp& op, GetCursor&, const Buffers&, const Layout&) {
  for (;;) {
    if (!test_request()) return false;
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
      case 1: {
        step_ = 2;
        if (!agreed_) {  // every rank falls back: nothing to read
          backend::ipc_finish();
          return true;
        }
        auto* recv = static_cast<std::byte*>(buffers_.recv);
        for (const BlockSpan& span : op.blocks) {
          for (int p = span.first; p < span.first + span.count; ++p) {
            if (layout_.bytes(p) == 0) continue;
            const backend::IpcPeer peer = backend::ipc_open(all_[static_cast<std::size_t>(p)]);
            if (peer.base == nullptr)
              throw Error(MPI_ERR_OTHER, "agx: CUDA IPC: a peer's buffer, mapped a moment ago, cannot be "
                                         "mapped again");
            // The peer's own block where the peer put it (its displacements, not ours).
            backend::ipc_copy(recv + layout_.offset(p), peer.base, layout_.bytes(p), peer);
          }
        }
        backend::ipc_finish();
        step();
        step_ = 3;
        return true;
      }
      default: return true;
    }
  }
}

bool IpcSegment::try_release(const NodeOp&) {
  if (fell_back()) return true;  // nobody read
  if (step_ == 3) {
    check_mpi(PMPI_Ibarrier(ctx_.comm(), &request_), "MPI_Ibarrier");
    step_ = 4;
  }
  return test_request();
}

std::string IpcSegment::waiting_for(const NodeOp& op, const GetCursor&) const {
  if (op.kind == NodeOp::Kind::release)
    return step_ >= 4 && request_ == MPI_REQUEST_NULL ? "" : "every peer's reads (CUDA IPC's barrier)";
  return step_ == 0   ? "the peers' IPC handles (CUDA IPC's allgather)"
         : step_ == 1 ? "the agreement that every rank mapped its peers (CUDA IPC's allreduce)"
                      : "";
}

void IpcSegment::put(const NodeOp&, const Buffers&, const Layout&, bool) { not_ipc("put"); }
void IpcSegment::signal(const NodeOp&) { not_ipc("signal of its own (the exchange signals)"); }
bool IpcSegment::try_wait(const NodeOp&) { not_ipc("wait of its own (a read waits)"); }
bool IpcSegment::try_get(const NodeOp&, GetCursor&, const Buffers&, const Layout&) { not_ipc("get"); }
void IpcSegment::own_to_host() { not_ipc("host mirror"); }
void IpcSegment::to_device(const Transfer&, std::size_t, std::size_t) { not_ipc("host mirror"); }
void IpcSegment::got(const NodeOp&, std::size_t, std::size_t) { not_ipc("host mirror"); }

IpcCall::IpcCall(CommContext& ctx, const Buffers& buffers, const Layout& layout, int tag)
    : schedule_(ipc_schedule(ctx.size(), ctx.rank())), segment_(ctx, buffers, layout) {
  Checks checks;
  checks.algorithm = "shared_memory";
  checks.stage = "CUDA IPC";
  execution_ = std::make_unique<Execution>(schedule_, buffers, layout, ctx.comm(), tag,
                                           config().max_message_bytes, segment_, checks);
  execution_->use_device(segment_);
  try {
    execution_->start();
  } catch (...) {
    segment_.abandon();
    throw;
  }
}

IpcCall::~IpcCall() {
  if (execution_->failed()) segment_.abandon();
  execution_.reset();  // (before the segment, which it runs on)
}

std::optional<bool> IpcCall::test() {
  if (!execution_->test()) return std::nullopt;
  return !segment_.fell_back();
}

}  // namespace agx::cuda
