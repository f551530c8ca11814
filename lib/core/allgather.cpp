// allgather_bytes: the library's blocking entry point. Checks what the typed front end
// cannot (communicator, layout against the communicator), chooses, and executes.
// While nonblocking requests run (lib/core/nonblocking.*), the wait also advances
// them, so that a blocking call between a start and its wait cannot deadlock.

#include <agx/bytes.hpp>
#include <agx/error.hpp>

#include "core/allgather.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/consistency.hpp"
#include "core/executor.hpp"
#include "core/nonblocking.hpp"
#include "core/select.hpp"
#include "cuda/device_path.hpp"
#include "hier/direct_write.hpp"
#include "hier/hier.hpp"

#include <sched.h>


namespace agx {

Algorithm allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                          const Options& options) {
  check_config();
  CommContext& ctx = checked_context(comm, buffers, layout);
  if (hier::direct_write_auto(ctx, options, buffers, layout)) return Algorithm::shared_memory;
  const AlgorithmChoice a = select_algorithm(ctx, layout, options, buffers.in_place);
  return run_selected(ctx, a, buffers, layout);
}

void wait_blocking(Execution& e) {
  if (!detail::progress_pending()) {
    e.wait();
    return;
  }
  while (!e.test()) {
    detail::progress_all();
    sched_yield();
  }
}

Algorithm run_selected(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                       const Layout& layout) {
  if (config().check) check_consistency(ctx, layout, a, buffers.in_place);
  // Device buffers: lib/cuda, which says what it ran (docs/gpu.md).
  if (const auto ran = cuda::run_device(ctx, a, buffers, layout)) return ran->algorithm;
  if (is_node_path(a.id)) {  // lib/hier's tuned blocking variants of the node schedules
    hier::run(ctx, a.id, buffers, layout);
    return a.id;
  }
  Execution e(ctx.schedule(a), buffers, layout, ctx.comm(), ctx.next_tag(),
              config().max_message_bytes, Checks::of(a.id));
  e.start();
  wait_blocking(e);
  return a.id;
}

}  // namespace agx
