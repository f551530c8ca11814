// allgather_bytes: the library's entry point. Checks what the typed front end cannot
// (communicator, layout against the communicator), chooses, and executes.

#include <agx/bytes.hpp>
#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/executor.hpp"
#include "core/select.hpp"
#include "cuda/device_path.hpp"
#include "hier/hier.hpp"

#include <string>

namespace agx {

Algorithm allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                          const Options& options) {
  CommContext& ctx = CommContext::of(comm);
  if (layout.nranks() != ctx.size())
    throw Error(MPI_ERR_ARG, "agx: layout has " + std::to_string(layout.nranks()) +
                                 " blocks for a communicator of " + std::to_string(ctx.size()) +
                                 " ranks");
  bool any_bytes = false;
  for (int b = 0; b < layout.nranks() && !any_bytes; ++b) any_bytes = layout.bytes(b) > 0;
  if (any_bytes && buffers.recv == nullptr)
    throw Error(MPI_ERR_BUFFER, "agx: receive buffer is null");
  if (!buffers.in_place && buffers.send == nullptr && layout.bytes(ctx.rank()) > 0)
    throw Error(MPI_ERR_BUFFER, "agx: send buffer is null");
  const Algorithm a = select_algorithm(ctx, layout, options, buffers.in_place);
  if (cuda::run_if_device(ctx, a, buffers, layout)) return a;  // device buffers: lib/cuda
  if (a == Algorithm::hierarchical || a == Algorithm::shared_memory) {
    hier::run(ctx, a, buffers, layout);
    return a;
  }
  execute(ctx.schedule(a), buffers, layout, ctx.comm(), ctx.next_tag(),
          config().max_message_bytes);
  return a;
}

}  // namespace agx
