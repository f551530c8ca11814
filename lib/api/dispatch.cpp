// The paths of a call (dispatch.hpp): blocking, and one start of a nonblocking or
// persistent call.

#include "api/dispatch.hpp"

#include "core/config.hpp"
#include "core/copy.hpp"
#include "core/consistency.hpp"
#include "core/nonblocking.hpp"
#include "cuda/device_path.hpp"
#include "cuda/memory.hpp"
#include "hier/direct_write.hpp"

namespace agx {

CallChoice choose_call(CommContext& ctx, const Layout& layout, const Options& options,
                       bool in_place, CallKind kind) {
  CallFacts facts;
  facts.kind = kind;
  facts.in_place = in_place;
  facts.node_begun = hier::node_begun(ctx);
  facts.device = !cuda::host_only(ctx);
  facts.direct_write_size = hier::direct_write_fits(layout);
  CallChoice c = choose(ctx.selector(), layout, options, facts);
  if (c.deferred && kind != CallKind::query) hier::defer_node_set_up(ctx);
  return c;
}

namespace {

Algorithm run_choice(CommContext& ctx, const CallChoice& c, const Buffers& buffers,
                     const Layout& layout) {
  const AlgorithmChoice& a = c.algorithm;
  if (config().check) check_consistency(ctx, layout, a, buffers.in_place);
  // Device buffers: lib/cuda, which says what it ran (docs/gpu.md).
  if (c.device)
    if (const auto ran = cuda::run_device(ctx, a, buffers, layout)) return ran->algorithm;
  switch (c.path) {
    case CallPath::own_copy:  // one rank, host memory: the own block's copy
      copy_own_block(buffers, layout, 0);
      return a.id;
    case CallPath::node:  // the node schedule on the round engine, its copy variants
      hier::run(ctx, a.id, buffers, layout);
      return a.id;
    case CallPath::point_to_point:
      break;
  }
  // Receive buffers in agx's shared regions on one node (hier/direct_write.hpp).
  if (c.try_direct_write &&
      hier::run_direct_write(ctx, buffers, layout,
                             buffers.in_place || !cuda::is_device_memory(buffers.send)))
    return Algorithm::shared_memory;
  Execution e(ctx.schedule(a), buffers, layout, ctx.comm(), ctx.next_tag(),
              config().max_message_bytes, Checks::of(a.id));
  e.start();
  wait_blocking(e);
  return a.id;
}

}  // namespace

Algorithm run_blocking(CommContext& ctx, const CallChoice& c, const Buffers& buffers,
                       const Layout& layout) {
  if (c.rival.algorithm.id == Algorithm::automatic) return run_choice(ctx, c, buffers, layout);
  // The model's choice against its rival (core/algorithm_trials.hpp): both timed on the
  // first calls of the size, then the faster kept until the trials run again.
  AlgorithmTrials& trials = ctx.algorithm_trials();
  const AlgorithmTrials::Pick pick =
      trials.pick(mean_block(layout), ctx.comm(), node_way(c));
  const double started = pick.trial_class >= 0 ? MPI_Wtime() : 0.0;
  const Algorithm ran = pick.way == 1 ? run_choice(ctx, rival_choice(c), buffers, layout)
                                      : run_choice(ctx, c, buffers, layout);
  if (pick.trial_class >= 0) trials.record(pick, MPI_Wtime() - started);
  return ran;
}

StartedCall::StartedCall(CommContext& ctx, const CallChoice& c, const Buffers& buffers,
                         const Layout& layout, detail::PersistentRounds* rounds)
    : ctx_(ctx), choice_(c), buffers_(buffers), layout_(layout), rounds_(rounds) {
  // Device buffers: lib/cuda decides without blocking, advanced by test(); the host path
  // starts when lib/cuda settles the call (at once where no rank sees a GPU; else in
  // call order once the ranks agreed on memory kinds).
  device_.emplace(ctx, c.algorithm, buffers, layout, [this] { start_host(); });
}

void StartedCall::start_host() {
  if (choice_.path == CallPath::own_copy) {  // one rank: done at once
    copy_own_block(buffers_, layout_, 0);
    return;
  }
  if (choice_.path == CallPath::node) {  // the node schedule on the round engine
    node_ = hier::start_node_call(ctx_, choice_.algorithm.id, buffers_, layout_);
    return;
  }
  if (rounds_ != nullptr) {
    rounds_->start();
    return;
  }
  execution_.emplace(ctx_.schedule(choice_.algorithm), buffers_, layout_, ctx_.comm(),
                     ctx_.next_tag(), config().max_message_bytes, Checks::of(choice_.algorithm.id));
  execution_->start();
}

bool StartedCall::test() {
  if (device_) {
    const std::optional<bool> on_device = device_->test();
    if (!on_device) return false;
    if (*on_device) return true;
  }
  if (node_) return hier::test_node_call(*node_);
  if (rounds_ != nullptr) return rounds_->test();
  return !execution_ || execution_->test();
}

}  // namespace agx
