// run_if_device: memory kinds agreed per call, then one of the three paths
// (docs/gpu.md). Every rank takes the same decisions from the same agreed inputs:
//   agreed = MAX over ranks of {has device buffers, recv not IPC-able, MPI not aware}
//   nobody has device buffers          -> false (host path, unchanged)
//   forced path (AGX_CUDA_PATH)        -> that path when it can serve, else staging
//   otherwise                          -> cheapest path by path_cost.hpp
// Ranks whose own buffers are host memory take part in aware/staging calls with the
// host executor and the same message size, which is the same traffic on the wire.

#include "cuda/device_path.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/executor.hpp"
#include "core/mpi_check.hpp"
#include "core/select.hpp"
#include "cuda/backend.hpp"
#include "cuda/memory.hpp"
#include "cuda/path_cost.hpp"
#include "cuda/settings.hpp"
#include "cuda/staging.hpp"
#include "hier/hier.hpp"

#if defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

namespace agx::cuda {
namespace {

/// Per communicator: whether any rank sees a GPU (asked once, collectively).
struct CommState {
  bool any_gpu = false;
};

int delete_state(MPI_Comm, int, void* attr, void*) {
  delete static_cast<CommState*>(attr);
  return MPI_SUCCESS;
}

CommState& state_of(CommContext& ctx) {
  static int keyval = MPI_KEYVAL_INVALID;
  if (keyval == MPI_KEYVAL_INVALID)
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &keyval, nullptr),
              "MPI_Comm_create_keyval");
  void* attr = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(ctx.comm(), keyval, &attr, &found), "MPI_Comm_get_attr");
  if (found) return *static_cast<CommState*>(attr);
  int local = device_count() > 0 ? 1 : 0, any = 0;
  check_mpi(MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, ctx.comm()), "MPI_Allreduce");
  auto* s = new CommState{any != 0};
  check_mpi(MPI_Comm_set_attr(ctx.comm(), keyval, s), "MPI_Comm_set_attr");
  return *s;
}

/// Whether this process's MPI library moves device memory itself.
bool mpi_is_cuda_aware() {
  if (const auto& forced = cuda_settings().mpi_aware) return *forced;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;  // Open MPI built without CUDA, or MPICH (no query: AGX_CUDA_AWARE_MPI=1)
#endif
}

std::optional<Path> last;

bool is_node_algorithm(Algorithm a) {
  return a == Algorithm::hierarchical || a == Algorithm::shared_memory;
}

void announce(const CommContext& ctx, Path p, const AlgorithmChoice& a, const char* note) {
  last = p;
  static std::set<std::string> said;
  if (!config().verbose || ctx.rank() != 0) return;  // AGX_VERBOSE (core/config.hpp)
  const std::string line = std::string(to_string(p)) + "/" + to_string(a) + note;
  if (said.insert(line).second)
    std::fprintf(stderr, "agx: device buffers: path %s\n", line.c_str());
}

/// This rank's part of an aware or staging call.
void run_local(CommContext& ctx, Path p, const AlgorithmChoice& choice, const Buffers& b,
               const Layout& layout, bool local_device, const StagingSettings& st) {
  const Algorithm a = choice.id;
  if (!local_device) {  // host buffers in a device call: the host path, same message size
    if (is_node_algorithm(a)) hier::run(ctx, a, b, layout, false);
    else execute(ctx.schedule(choice), b, layout, ctx.comm(), ctx.next_tag(), st.piece_bytes);
    return;
  }
  if (p == Path::aware && !is_node_algorithm(a)) {
    const std::size_t own = layout.bytes(ctx.rank());
    if (!b.in_place && own > 0)
      backend::copy_sync(static_cast<std::byte*>(b.recv) + layout.offset(ctx.rank()), b.send, own);
    else
      backend::wait_caller_stream();
    execute(ctx.schedule(choice), Buffers{nullptr, b.recv, true}, layout, ctx.comm(), ctx.next_tag(),
            st.piece_bytes);
    return;
  }
  DeviceOps& ops = backend::device_ops();
  if (is_node_algorithm(a))
    run_staged(ops, backend::pinned_pool(), ctx.rank(), b, layout, st,
               [&](const Buffers& mirror) { hier::run(ctx, a, mirror, layout, false); });
  else
    run_staging(ops, backend::pinned_pool(), ctx.schedule(choice), b, layout, ctx.comm(),
                ctx.next_tag(), st);
}

}  // namespace

std::optional<Path> last_path() { return last; }

bool run_if_device(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                   const Layout& layout) {
  const CudaSettings& s = cuda_settings();
  if (!built_with_cuda() || s.off) return false;
  if (!state_of(ctx).any_gpu) return false;

  const int me = ctx.rank();
  bool any_bytes = false;
  for (int r = 0; r < layout.nranks() && !any_bytes; ++r) any_bytes = layout.bytes(r) > 0;
  const MemoryKind send_kind = !buffers.in_place && layout.bytes(me) > 0
                                   ? memory_kind(buffers.send) : MemoryKind::host;
  const MemoryKind recv_kind = any_bytes ? memory_kind(buffers.recv) : MemoryKind::host;
  const bool local_device = needs_device_path(send_kind) || needs_device_path(recv_kind);
  int mine[3] = {local_device ? 1 : 0, recv_kind != MemoryKind::device ? 1 : 0,
                 mpi_is_cuda_aware() ? 0 : 1};
  int agreed[3] = {0, 0, 0};
  check_mpi(MPI_Allreduce(mine, agreed, 3, MPI_INT, MPI_MAX, ctx.comm()), "MPI_Allreduce");
  if (agreed[0] == 0) return false;
  if (!s.invalid_path.empty())
    throw Error(MPI_ERR_ARG, "agx: AGX_CUDA_PATH='" + s.invalid_path +
                                 "' names no path (aware, staging, ipc, auto)");

  PathOptions allowed;
  allowed.aware = agreed[2] == 0;
  allowed.ipc = agreed[1] == 0 && ctx.selector().placement().nodes() == 1 && ctx.size() > 1;
  StagingSettings st;
  st.chunk_bytes = s.chunk_bytes;
  st.piece_bytes = std::min(config().max_message_bytes, s.chunk_bytes);

  Path p = Path::staging;
  if (s.forced) {
    p = *s.forced;
    if ((p == Path::aware && !allowed.aware) || (p == Path::ipc && !allowed.ipc)) p = Path::staging;
  } else {
    // Node algorithms are schedules too: priced as planned, never as free.
    const double schedule_s =
        predict_algorithm(a, layout, ctx.selector().placement(), ctx.selector().tuning().params,
                          buffers.in_place, ctx.selector().stage());
    p = choose_path(allowed, schedule_s, layout, st.piece_bytes);
  }
  if (p == Path::ipc) {
    if (run_ipc(ctx, buffers, layout)) {
      announce(ctx, p, a, "");
      return true;
    }
    p = Path::staging;  // some rank cannot map a peer: every rank falls back
  }
  announce(ctx, p, a, s.forced && *s.forced != p ? " (forced path cannot serve)" : "");
  run_local(ctx, p, a, buffers, layout, local_device, st);
  return true;
}

}  // namespace agx::cuda
