// Nonblocking all-gather: the choice for nonblocking calls, the Operation state
// shared by single calls and plans, the single call itself (an Execution on the
// communicator's private duplicate with the call's own tag), and the public
// agx::Request / agx::Plan members (include/agx/request.hpp).

#include "core/nonblocking.hpp"

#include <agx/error.hpp>
#include <agx/request.hpp>

#include <algorithm>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/consistency.hpp"
#include "core/executor.hpp"
#include "core/select.hpp"
#include "cuda/device_path.hpp"
#include "hier/hier.hpp"

#include <sched.h>

#include <bit>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

namespace agx {

bool is_node_path(Algorithm a) {
  return a == Algorithm::hierarchical || a == Algorithm::shared_memory;
}

CommContext& checked_context(MPI_Comm comm, const Buffers& buffers, const Layout& layout) {
  CommContext& ctx = CommContext::of(comm);
  if (layout.nranks() != ctx.size())
    throw Error(MPI_ERR_ARG, "agx: layout has " + std::to_string(layout.nranks()) +
                                 " blocks for a communicator of " + std::to_string(ctx.size()) +
                                 " ranks");
  // Every block must end, and all blocks together must fit, within what a pointer
  // difference can hold: sizes that wrap would move bytes to the wrong places.
  constexpr std::size_t limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  bool any_bytes = false;
  std::size_t total = 0;
  if (layout.is_uniform()) {  // one size: the last block's end is the total
    const std::size_t bytes = layout.bytes(0), n = static_cast<std::size_t>(layout.nranks());
    if (__builtin_mul_overflow(bytes, n, &total) || total > limit)
      throw Error(MPI_ERR_COUNT, "agx: " + std::to_string(n) + " blocks of " + std::to_string(bytes) +
                                     " bytes add up to more bytes than a buffer can hold");
    any_bytes = total > 0;
  }
  for (int b = 0; b < layout.nranks() && !layout.is_uniform(); ++b) {
    const std::size_t bytes = layout.bytes(b);
    any_bytes = any_bytes || bytes > 0;
    std::size_t start = 0, end = 0;  // a uniform layout's offset is bytes * b: checked here
    const bool start_wraps = layout.is_uniform()
                                 ? __builtin_mul_overflow(bytes, static_cast<std::size_t>(b), &start)
                                 : (start = layout.offset(b), false);
    if (start_wraps || __builtin_add_overflow(start, bytes, &end) || end > limit)
      throw Error(MPI_ERR_COUNT, "agx: block " + std::to_string(b) + " (" + std::to_string(bytes) +
                                     " bytes) ends past the largest buffer size");
    if (__builtin_add_overflow(total, bytes, &total) || total > limit)
      throw Error(MPI_ERR_COUNT, "agx: the blocks of ranks 0.." + std::to_string(b) +
                                     " add up to more bytes than a buffer can hold");
  }
  if (any_bytes && buffers.recv == nullptr)
    throw Error(MPI_ERR_BUFFER, "agx: receive buffer is null");
  if (!buffers.in_place && buffers.send == nullptr && layout.bytes(ctx.rank()) > 0)
    throw Error(MPI_ERR_BUFFER, "agx: send buffer is null");
  return ctx;
}

AlgorithmChoice select_nonblocking(CommContext& ctx, const Layout& layout, const Options& options,
                                   bool in_place) {
  // The same choice as a blocking call's: shared_memory and hierarchical run on the
  // round engine too (lib/hier/node_call.cpp). Only while the node's segment is not yet
  // set up or too small for this call (making or growing it is collective) does `auto`
  // take the best point-to-point algorithm instead; a forced node path sets it up then.
  const AlgorithmChoice a = select_algorithm(ctx, layout, options, in_place);
  const bool forced = options.algorithm != Algorithm::automatic ||
                      (options.use_environment && config().forced.has_value());
  if (!is_node_path(a.id) || forced || hier::node_call_ready(ctx, layout)) return a;
  AlgorithmChoice best{Algorithm::ring, 0};
  double best_s = std::numeric_limits<double>::infinity();
  for (const auto& [alg, s] : ctx.selector().predictions(layout, in_place))
    if (!is_node_path(alg.id) && s < best_s) best_s = s, best = alg;  // same on every rank
  return best;
}

OwnedLayout::OwnedLayout(const Layout& l) {
  if (l.is_uniform()) {
    layout_ = Layout::uniform(l.nranks(), l.nranks() > 0 ? l.bytes(0) : 0);
    return;
  }
  for (int b = 0; b < l.nranks(); ++b) {
    bytes_.push_back(l.bytes(b));
    offsets_.push_back(l.offset(b));
  }
  layout_ = Layout::varying(bytes_, offsets_);
}

namespace detail {
namespace {

/// The operations whose mutex this thread holds: progress_all skips them (a start's
/// device agreement advances the other requests while the start holds its own
/// operation; try_lock on a mutex the thread holds is undefined behaviour).
thread_local std::vector<const Operation*> held_here;

struct Held {
  explicit Held(const Operation* op) { held_here.push_back(op); }
  ~Held() { held_here.pop_back(); }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
};

}  // namespace

void Operation::set_active(bool on) {
  if (active_.exchange(on) != on) progress_count_active(on ? 1 : -1);
}

void Operation::start() {
  {
    std::lock_guard lock(mutex_);
    const Held held(this);
    if (active_)
      throw Error(MPI_ERR_REQUEST, "agx: start() while the previous start is still running");
    failure_ = nullptr;
    ++starts_;
    do_start();
    set_active(true);
  }
  progress_all();  // a first push: small calls often finish here
}

void Operation::rethrow_failure() {
  if (!failure_) return;
  std::exception_ptr f = failure_;
  failure_ = nullptr;
  set_active(false);
  std::rethrow_exception(f);
}

bool Operation::test() {
  std::lock_guard lock(mutex_);
  const Held held(this);
  rethrow_failure();
  if (!active_) return true;
  try {
    if (do_test()) set_active(false);
  } catch (...) {
    set_active(false);
    throw;
  }
  return !active_;
}

void Operation::wait() {
  // Every other running operation of this process advances too, so that requests
  // may be waited for in any order on different ranks without deadlock.
  while (!test()) {
    progress_all();
    sched_yield();
  }
}

void Operation::try_progress() noexcept {
  if (std::find(held_here.begin(), held_here.end(), this) != held_here.end()) return;
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock || !active_ || failure_) return;
  const Held held(this);
  try {
    if (do_test()) set_active(false);
  } catch (...) {
    failure_ = std::current_exception();  // the owner sees it at its next test/wait
  }
}

namespace {

/// One nonblocking call: an Execution with the call's own tag on ctx's duplicate.
class Single final : public Operation {
 public:
  Single(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers, const Layout& layout)
      : Operation(a, layout), ctx_(ctx.share()), buffers_(buffers) {}

 private:
  void do_start() override {
    // Device buffers: the device path (lib/cuda), advanced by do_test; the host path
    // starts when lib/cuda settles the call (at once where no rank sees a GPU; else in
    // call order once the ranks agreed on memory kinds).
    device_.emplace(*ctx_, choice(), buffers_, this->layout(), [this] { start_host(); });
  }
  void start_host() {
    if (is_node_path(algorithm())) {  // the node schedule on the round engine
      node_ = hier::start_node_call(*ctx_, algorithm(), buffers_, this->layout());
      return;
    }
    execution_.emplace(ctx_->schedule(choice()), buffers_, this->layout(), ctx_->comm(),
                       ctx_->next_tag(), config().max_message_bytes, Checks::of(algorithm()));
    execution_->start();
  }
  bool do_test() override {
    if (device_) {
      const std::optional<bool> on_device = device_->test();
      if (!on_device) return false;
      if (*on_device) return true;
    }
    if (node_) return hier::test_node_call(*node_);
    return !execution_ || execution_->test();
  }

  std::shared_ptr<CommContext> ctx_;  // kept alive past MPI_Comm_free (comm_context.hpp)
  Buffers buffers_;
  std::optional<Execution> execution_;
  hier::NodeCallPtr node_;
  std::optional<cuda::DeviceCall> device_;  // destroyed first: it may run a path on buffers_
};

}  // namespace

OperationPtr make_single(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                         const Layout& layout) {
  OperationPtr op(new Single(ctx, a, buffers, layout));
  progress_register(op.get());
  return op;
}

void OperationDeleter::operator()(Operation* op) const noexcept {
  progress_unregister(op);  // the progress thread no longer touches it
  delete op;
}

}  // namespace detail

Request start_allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                              const Options& options) {
  check_config();
  detail::progress_from_environment();
  CommContext& ctx = checked_context(comm, buffers, layout);
  const AlgorithmChoice a = select_nonblocking(ctx, layout, options, buffers.in_place);
  if (config().check) check_consistency(ctx, layout, a, buffers.in_place);  // synchronizing
  detail::OperationPtr op = detail::make_single(ctx, a, buffers, layout);
  op->start();
  return Request(std::move(op));
}

Plan plan_allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                          const Options& options) {
  check_config();
  detail::progress_from_environment();
  CommContext& ctx = checked_context(comm, buffers, layout);
  const AlgorithmChoice a = select_nonblocking(ctx, layout, options, buffers.in_place);
  if (config().check) check_consistency(ctx, layout, a, buffers.in_place);  // once, at planning
  return Plan(detail::make_persistent(ctx, a, buffers, layout));
}

namespace {

// A destructor must not throw: wait, and report a failure on stderr.
void wait_quietly(detail::Operation* op, const char* what) noexcept {
  if (op == nullptr || !op->active()) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    std::fprintf(stderr, "agx: %s destroyed after MPI_Finalize while still running\n", what);
    return;
  }
  try {
    op->wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agx: %s failed while its destructor waited: %s\n", what, e.what());
  }
}

}  // namespace

Request::Request(detail::OperationPtr op) : op_(std::move(op)) {}
Request::~Request() { wait_quietly(op_.get(), "agx::Request"); }
Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    wait_quietly(op_.get(), "agx::Request");
    op_ = std::move(other.op_);
  }
  return *this;
}
bool Request::test() {
  if (!op_) return true;
  detail::progress_all();
  return op_->test();
}
void Request::wait() {
  if (op_) op_->wait();
}
bool Request::active() const { return op_ && op_->active(); }
Algorithm Request::algorithm() const { return op_ ? op_->algorithm() : Algorithm::automatic; }

Plan::Plan(detail::OperationPtr op) : op_(std::move(op)) {}
Plan::~Plan() { wait_quietly(op_.get(), "agx::Plan"); }
Plan& Plan::operator=(Plan&& other) noexcept {
  if (this != &other) {
    wait_quietly(op_.get(), "agx::Plan");
    op_ = std::move(other.op_);
  }
  return *this;
}
void Plan::start() {
  if (!op_) throw Error(MPI_ERR_REQUEST, "agx: start() on an empty agx::Plan");
  op_->start();
}
bool Plan::test() {
  if (!op_) return true;
  detail::progress_all();
  return op_->test();
}
void Plan::wait() {
  if (op_) op_->wait();
}
bool Plan::active() const { return op_ && op_->active(); }
Algorithm Plan::algorithm() const { return op_ ? op_->algorithm() : Algorithm::automatic; }
std::uint64_t Plan::starts() const { return op_ ? op_->starts() : 0; }

}  // namespace agx
