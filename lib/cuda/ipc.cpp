// The CUDA IPC path inside one node (docs/gpu.md):
//   1. each rank puts its own block in place in its device receive buffer and records
//      its interprocess "ready" event on its stream;
//   2. one allgather exchanges (receive allocation handle, own block offset in it,
//      event handle);
//   3. each rank opens its peers' handles (cached per handle in backend) and the ranks
//      agree that every open worked, else all fall back to staging;
//   4. for each peer: the stream waits for the peer's ready event, then copies the
//      peer's own block device-to-device straight out of the peer's receive buffer;
//   5. wait for the copies, then a barrier: no rank returns (and lets its caller reuse
//      the receive buffer) while a peer may still read from it.

#include "cuda/device_path.hpp"

#include "core/comm_context.hpp"
#include "core/mpi_check.hpp"
#include "cuda/backend.hpp"

#include <vector>

namespace agx::cuda {

bool run_ipc(CommContext& ctx, const Buffers& buffers, const Layout& layout) {
  const int n = ctx.size(), me = ctx.rank();
  backend::IpcExport mine{};
  mine.ok = backend::ipc_begin(buffers.send, buffers.recv, buffers.in_place, layout.offset(me),
                               layout.bytes(me), mine)
                ? 1
                : 0;
  std::vector<backend::IpcExport> all(static_cast<std::size_t>(n));
  check_mpi(PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE,
                           ctx.comm()),
            "MPI_Allgather");
  int ok = 1;
  for (const auto& e : all) ok = ok && e.ok;
  std::vector<backend::IpcPeer> peers(static_cast<std::size_t>(n));
  for (int p = 0; p < n && ok; ++p) {
    if (p == me || layout.bytes(p) == 0) continue;
    peers[static_cast<std::size_t>(p)] = backend::ipc_open(all[static_cast<std::size_t>(p)]);
    ok = peers[static_cast<std::size_t>(p)].base != nullptr;
  }
  int agreed = 0;
  check_mpi(PMPI_Allreduce(&ok, &agreed, 1, MPI_INT, MPI_MIN, ctx.comm()), "MPI_Allreduce");
  if (!agreed) {
    backend::ipc_finish();
    return false;
  }
  auto* recv = static_cast<std::byte*>(buffers.recv);
  for (int p = 0; p < n; ++p) {
    const auto up = static_cast<std::size_t>(p);
    if (p == me || layout.bytes(p) == 0) continue;
    // The peer's own block where the peer put it (its displacements, not ours).
    backend::ipc_copy(recv + layout.offset(p), peers[up].base, layout.bytes(p), peers[up]);
  }
  backend::ipc_finish();
  check_mpi(PMPI_Barrier(ctx.comm()), "MPI_Barrier");
  return true;
}

}  // namespace agx::cuda
