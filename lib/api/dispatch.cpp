// The paths of a call (dispatch.hpp): blocking, and one start of a nonblocking or
// persistent call.

#include "api/dispatch.hpp"

#include "core/config.hpp"
#include "core/copy.hpp"
#include "core/consistency.hpp"
#include "core/nonblocking.hpp"
#include "core/select.hpp"
#include "cuda/device_path.hpp"


namespace agx {

Algorithm run_selected(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                       const Layout& layout) {
  if (config().check) check_consistency(ctx, layout, a, buffers.in_place);
  // Device buffers: lib/cuda, which says what it ran (docs/gpu.md).
  if (const auto ran = cuda::run_device(ctx, a, buffers, layout)) return ran->algorithm;
  if (ctx.size() == 1) {  // one rank, host memory: every algorithm is the own block's copy
    if (!buffers.in_place && layout.bytes(0) > 0)
      copy_bytes(static_cast<std::byte*>(buffers.recv) + layout.offset(0), buffers.send,
                 layout.bytes(0));
    return a.id;
  }
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

bool is_automatic(const Options& options) {
  return options.algorithm == Algorithm::automatic &&
         !(options.use_environment && config().forced.has_value());
}

AlgorithmChoice select_blocking(CommContext& ctx, const Layout& layout, const Options& options,
                                bool in_place, bool mark, bool* deferred) {
  const AlgorithmChoice a = select_algorithm(ctx, layout, options, in_place);
  const bool defer =
      is_node_path(a.id) && is_automatic(options) && hier::defer_node_set_up(ctx, mark);
  if (deferred != nullptr) *deferred = defer;
  return defer ? ctx.selector().best_point_to_point(layout, in_place) : a;
}

AlgorithmChoice select_nonblocking(CommContext& ctx, const Layout& layout, const Options& options,
                                   bool in_place, bool persistent) {
  // The same choice as a blocking call's: shared_memory and hierarchical run on the
  // round engine (lib/hier/node_call.cpp), which sets the node up and grows its segment
  // from test(), never waiting inside start(). The first-call rule is the blocking one:
  // the communicator's first `auto` call whose choice is a node path, blocking or
  // nonblocking, runs the best point-to-point algorithm instead and the next one makes
  // the node state. A persistent plan, made to be started many times, keeps its node path.
  const AlgorithmChoice a = select_algorithm(ctx, layout, options, in_place);
  if (!is_node_path(a.id) || !is_automatic(options) || persistent ||
      !hier::defer_node_set_up(ctx, true))
    return a;
  return ctx.selector().best_point_to_point(layout, in_place);
}

StartedCall::StartedCall(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                         const Layout& layout, detail::PersistentRounds* rounds)
    : ctx_(ctx), choice_(a), buffers_(buffers), layout_(layout), rounds_(rounds) {
  // Device buffers: lib/cuda decides without blocking, advanced by test(); the host path
  // starts when lib/cuda settles the call (at once where no rank sees a GPU; else in
  // call order once the ranks agreed on memory kinds).
  device_.emplace(ctx, a, buffers, layout, [this] { start_host(); });
}

void StartedCall::start_host() {
  if (is_node_path(choice_.id)) {  // the node schedule on the round engine
    node_ = hier::start_node_call(ctx_, choice_.id, buffers_, layout_);
    return;
  }
  if (rounds_ != nullptr) {
    rounds_->start();
    return;
  }
  execution_.emplace(ctx_.schedule(choice_), buffers_, layout_, ctx_.comm(), ctx_.next_tag(),
                     config().max_message_bytes, Checks::of(choice_.id));
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
