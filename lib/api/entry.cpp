// The library's byte-level entry points (include/agx/bytes.hpp, request.hpp): check,
// set up the communicator on first use (context.hpp), choose, and run on the call's
// path (dispatch.hpp). Blocking calls advance running nonblocking ones while they wait.

#include <agx/bytes.hpp>
#include <agx/error.hpp>
#include <agx/request.hpp>

#include "api/context.hpp"
#include "api/dispatch.hpp"
#include "api/library_call.hpp"
#include "core/config.hpp"
#include "core/consistency.hpp"
#include "core/idle_pool.hpp"
#include "core/mpi_check.hpp"
#include "core/nonblocking.hpp"
#include "core/persistent.hpp"
#include "core/select.hpp"
#include "core/tls.hpp"

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace agx {
namespace {

// After MPI_Finalize (a request or plan destroyed then, as one at the end of main() is)
// a communicator's state must not be freed: its members free communicators and shared
// memory through MPI, which aborts then. MPI has released all of it already, so an
// operation's reference moves, at that point, to a list that is never freed (the process
// is ending); before MPI_Finalize it stays, to be dropped as usual.
void keep_past_finalize(std::shared_ptr<CommContext>& ctx) noexcept {
  // (Usually one load: the state is 1 from the first start or plan until MPI_Finalize.)
  if (ctx == nullptr || detail::mpi_usable_state.load(std::memory_order_acquire) == 1) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) return;
  static auto* const kept = new std::vector<std::shared_ptr<CommContext>>;
  try {
    kept->push_back(std::move(ctx));
  } catch (...) {  // (out of memory: leave it where it is)
    new std::shared_ptr<CommContext>(std::move(ctx));
  }
}

// Whether a wait on ctx's communicator may spin before yielding (Operation::may_spin).
bool spins(const CommContext& ctx) {
  return ctx.node_state() != nullptr && ctx.node_state()->core_per_rank();
}

/// One nonblocking call: the communicator's private duplicate, the call's own tag.
/// Reused: a request done with it hands it to a pool of idle ones (dispose), which the
/// next start takes (take), so that a repeated start allocates no operation. An idle
/// one holds no call and no communicator.
class Single final : public detail::Operation {
 public:
  Single(CommContext& ctx, const CallChoice& c, const Buffers& buffers, const Layout& layout)
      : Operation(c.algorithm, layout), ctx_(ctx.share()), call_choice_(c), buffers_(buffers) {}
  ~Single() override { keep_past_finalize(ctx_); }  // (before the members go)

  /// An idle single call made this one (registered with the progress engine unless it
  /// runs inside another operation that drives it: Deferred), or a new one.
  static detail::OperationPtr take(CommContext& ctx, const CallChoice& c,
                                   const Buffers& buffers, const Layout& layout,
                                   bool registered = true);

 private:
  void do_start() override { call_.emplace(*ctx_, call_choice_, buffers_, layout(), nullptr); }
  bool do_test() override { return call_->test(); }
  bool may_spin() const override { return spins(*ctx_); }
  void dispose() noexcept override;

  /// The idle ones (never destroyed: a request may outlive static destruction; the
  /// idle ones stay reachable).
  static IdlePool<Single>& pool() {
    static auto* const p = new IdlePool<Single>;
    return *p;
  }

  std::shared_ptr<CommContext> ctx_;  // kept alive past MPI_Comm_free (comm_context.hpp)
  CallChoice call_choice_;
  Buffers buffers_;
  std::optional<StartedCall> call_;
};

detail::OperationPtr Single::take(CommContext& ctx, const CallChoice& c,
                                  const Buffers& buffers, const Layout& layout, bool registered) {
  Single* s = pool().take();
  if (s == nullptr) {
    s = new Single(ctx, c, buffers, layout);
  } else {
    s->reuse(c.algorithm, layout);
    s->ctx_ = ctx.share();
    s->call_choice_ = c;
    s->buffers_ = buffers;
  }
  detail::OperationPtr op(s);
  if (registered) detail::progress_register(s);
  return op;
}

void Single::dispose() noexcept {
  if (active()) {  // (a request destroyed after MPI_Finalize while running)
    delete this;
    return;
  }
  call_.reset();  // its node call goes back to its schedule's pool (hier/node_call.cpp)
  keep_past_finalize(ctx_);
  ctx_.reset();  // the communicator's state may go now
  if (!pool().keep(this)) delete this;
}

/// A persistent call: point-to-point algorithms on persistent requests made once
/// (core/persistent.hpp); device buffers and node paths per start, as single calls.
class Persistent final : public detail::Operation {
 public:
  Persistent(CommContext& ctx, const CallChoice& c, const Buffers& buffers, const Layout& layout)
      : Operation(c.algorithm, layout), ctx_(ctx.share()), call_choice_(c), buffers_(buffers) {
    if (c.path == CallPath::point_to_point) rounds_.emplace(ctx, c.algorithm, buffers, this->layout());
  }
  ~Persistent() override { keep_past_finalize(ctx_); }  // (before the members go)

 private:
  void do_start() override {
    detail::check_mpi_usable();  // a plan kept past MPI_Finalize: an error, not an abort
    if (rounds_) rounds_->check_usable();
    call_.reset();
    call_.emplace(*ctx_, call_choice_, buffers_, layout(), rounds_ ? &*rounds_ : nullptr);
  }
  bool do_test() override { return call_->test(); }
  bool may_spin() const override { return spins(*ctx_); }

  std::shared_ptr<CommContext> ctx_;  // kept alive past MPI_Comm_free (comm_context.hpp)
  CallChoice call_choice_;
  Buffers buffers_;
  std::optional<detail::PersistentRounds> rounds_;
  std::optional<StartedCall> call_;
};

/// A call on a communicator whose set-up is in flight (api/context.hpp, SetupInFlight):
/// it starts once the set-up has made the context, in the order the calls were made on
/// this rank (the same on every rank). A nonblocking call then runs as a Single; a
/// persistent one makes its plan there, and each start runs it (a start made before the
/// context waits in the same order). Its algorithm is known from then on.
class Deferred final : public detail::Operation {
 public:
  Deferred(std::shared_ptr<SetupInFlight> setup, bool persistent, const Buffers& buffers,
           const Layout& layout, const Options& options)
      : Operation(AlgorithmChoice{}, layout), setup_(std::move(setup)), persistent_(persistent),
        buffers_(buffers), options_(options) {
    if (persistent_)  // the plan, in its place among the calls on this communicator
      setup_->on_ready([this](CommContext& ctx) {
        guarded_launch([&] {
          const CallChoice c = choice_for(ctx, CallKind::persistent);
          set_choice(c.algorithm);
          inner_ = make_persistent(ctx, c);
        });
      });
  }

 private:
  void do_start() override {
    detail::check_mpi_usable();  // a plan kept past MPI_Finalize: an error, not an abort
    launched_ = false;
    if (ready_) {  // a plan's later starts: its own, at once (no launch to queue)
      guarded_launch([&] {
        if (inner_) inner_->start();
        launched_ = true;
      });
      return;
    }
    setup_->on_ready([this](CommContext& ctx) {
      guarded_launch([&] {
        if (!persistent_) {
          const CallChoice c = choice_for(ctx, CallKind::nonblocking);
          set_choice(c.algorithm);
          // (not registered: this operation drives it, and its launch may run inside
          // the progress engine's own loop)
          inner_ = Single::take(ctx, c, buffers_, layout(), false);
        }
        if (inner_) inner_->start();
        launched_ = true;
      });
    });
  }
  bool do_test() override {
    if (!ready_) {
      if (!setup_->advance()) return false;  // (the launches run there, or ran before)
      ready_ = true;
    }
    if (failure_) std::rethrow_exception(failure_);
    return launched_ && inner_->test();  // (not launched yet: an earlier call's start runs)
  }
  // Runs a launch, keeping its failure for this call's test (the set-up goes on for the
  // calls after it).
  template <class F>
  void guarded_launch(F&& f) {
    try {
      f();
    } catch (...) {
      failure_ = std::current_exception();
    }
  }
  // The call's choice; a forced algorithm that cannot serve it (the interposer's
  // AGX_ALGO, checked before the set-up only for its name and radix) falls back to the
  // automatic choice, as the interposer's calls do.
  CallChoice choice_for(CommContext& ctx, CallKind kind) {
    try {
      return choose_call(ctx, layout(), options_, buffers_.in_place, kind);
    } catch (const Error&) {
      if (options_.algorithm == Algorithm::automatic || !options_.use_environment) throw;
      return choose_call(ctx, layout(), Options{Algorithm::automatic, false}, buffers_.in_place, kind);
    }
  }
  detail::OperationPtr make_persistent(CommContext& ctx, const CallChoice& c);

  std::shared_ptr<SetupInFlight> setup_;
  bool persistent_;
  Buffers buffers_;
  Options options_;
  detail::OperationPtr inner_;
  std::atomic<bool> launched_{false};  // this start's launch ran (a persistent one: reset per start)
  bool ready_ = false;  // the set-up has ended and every launch queued before it ran
  std::exception_ptr failure_;
};

/// The last blocking call of this thread with one block size, whose choice a repeated
/// call of the same shape reuses: same communicator (still the same context: no
/// context was deleted since), ranks, block bytes, in-place use and options. It skips
/// the layout checks (the same layout passed them) and the choice, which is fixed for a
/// shape once a call ran it (select.hpp's memo); the buffer checks still run. Not
/// recorded for a call that the first-call rule deferred (core/choose.hpp): the next
/// call must make the node state. The interposer has its own (pmpi/fast_call.hpp).
struct LastCall {
  bool valid = false;
  MPI_Comm comm = MPI_COMM_NULL;
  std::uint64_t deletions = 0;
  CommContext* ctx = nullptr;
  int nranks = 0;
  std::size_t block = 0;
  bool in_place = false;
  Options options;
  CallChoice choice;

  bool serves(MPI_Comm c, const Layout& layout, const Options& o, bool in) const {
    return valid && c == comm && layout.is_uniform() && layout.nranks() == nranks &&
           layout.bytes(0) == block && in == in_place && o.algorithm == options.algorithm &&
           o.use_environment == options.use_environment && o.radix == options.radix &&
           deletions == CommContext::deletions();
  }
};
// (AGX_FAST_TLS, core/tls.hpp: no __tls_get_addr per call)
AGX_FAST_TLS thread_local LastCall last_call;

template <class Op>
detail::OperationPtr make(CommContext& ctx, const CallChoice& c, const Buffers& buffers,
                          const Layout& layout) {
  detail::OperationPtr op(new Op(ctx, c, buffers, layout));
  detail::progress_register(op.get());
  return op;
}

detail::OperationPtr Deferred::make_persistent(CommContext& ctx, const CallChoice& c) {
  return detail::OperationPtr(new Persistent(ctx, c, buffers_, layout()));  // (not registered: see do_start)
}

// A call on a communicator with no context yet that may begin a nonblocking set-up
// (context.hpp): the Deferred operation that waits for it, or null (no set-up in flight
// and none allowed). Checked as any call is, before anything moves.
detail::OperationPtr deferred_call(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                                   const Options& options, bool persistent) {
  int size = 0, rank = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_call(size, rank, buffers, layout);
  forced_choice(options, size);  // the option errors of any call (a bad radix, AGX_ALGO)
  std::shared_ptr<SetupInFlight> setup = set_up_in_flight(comm, true);
  if (setup == nullptr) return nullptr;
  detail::OperationPtr op(new Deferred(std::move(setup), persistent, buffers, layout, options));
  detail::progress_register(op.get());
  return op;
}

}  // namespace

Algorithm blocking_call(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                        const Options& options, CallChoice* choice) {
  check_config();
  LastCall& last = last_call;
  if (last.serves(comm, layout, options, buffers.in_place)) {
    check_buffers(buffers, last.block > 0, last.block);
    if (choice != nullptr) *choice = last.choice;
    return run_blocking(*last.ctx, last.choice, buffers, layout);
  }
  CommContext& ctx = checked_context(comm, buffers, layout);
  const CallChoice c = choose_call(ctx, layout, options, buffers.in_place, CallKind::blocking);
  if (choice != nullptr) *choice = c;
  last.valid = false;
  const Algorithm ran = run_blocking(ctx, c, buffers, layout);
  if (!c.deferred && layout.is_uniform())
    last = LastCall{true, comm, CommContext::deletions(), &ctx, layout.nranks(), layout.bytes(0),
                    buffers.in_place, options, c};
  return ran;
}

Algorithm allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                          const Options& options) {
  return blocking_call(comm, buffers, layout, options);
}

AlgorithmChoice choose_algorithm(MPI_Comm comm, const Layout& layout, const Options& options,
                                 bool in_place) {
  CommContext& ctx = context(comm);
  const CallChoice c = choose_call(ctx, layout, options, in_place, CallKind::query);
  // Where the next blocking call would run the rival (a trial call, or the rival kept:
  // core/algorithm_trials.hpp), that is what it runs.
  if (c.rival.algorithm.id != Algorithm::automatic &&
      ctx.algorithm_trials().peek(mean_block(layout), node_way(c)) == 1)
    return c.rival.algorithm;
  return c.algorithm;
}

Request start_allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                              const Options& options) {
  detail::check_mpi_usable();  // before MPI_Init or after MPI_Finalize: MPI_ERR_OTHER
  check_config();
  detail::progress_from_environment();
  // A communicator not set up yet: the blocking set-up waits for every rank, which a start
  // must not do. A set-up that waits for no rank begins (or is in flight) where the
  // interposer allows it (context.hpp); else the MPI library's own nonblocking all-gather
  // serves the call (api/library_call.hpp). AGX_CHECK's agreement synchronizes anyway: it
  // sets up.
  if (existing_context(comm) == nullptr && !config().check) {
    if (detail::OperationPtr op = deferred_call(comm, buffers, layout, options, false)) {
      op->start();
      return Request(std::move(op));
    }
    return Request(start_library_call(comm, buffers, layout, options));
  }
  CommContext& ctx = checked_context(comm, buffers, layout);
  const CallChoice c = choose_call(ctx, layout, options, buffers.in_place, CallKind::nonblocking);
  if (config().check) check_consistency(ctx, layout, c.algorithm, buffers.in_place);  // synchronizing
  detail::OperationPtr op = Single::take(ctx, c, buffers, layout);
  op->start();
  return Request(std::move(op));
}

Plan plan_allgather_bytes(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                          const Options& options) {
  detail::check_mpi_usable();
  check_config();
  detail::progress_from_environment();
  // The plan of a communicator not set up yet waits for no rank where a set-up in
  // flight serves it (as a start would); else the set-up is made here, collectively.
  if (existing_context(comm) == nullptr && !config().check)
    if (detail::OperationPtr op = deferred_call(comm, buffers, layout, options, true))
      return Plan(std::move(op));
  CommContext& ctx = checked_context(comm, buffers, layout);
  const CallChoice c = choose_call(ctx, layout, options, buffers.in_place, CallKind::persistent);
  if (config().check) check_consistency(ctx, layout, c.algorithm, buffers.in_place);  // once, at planning
  return Plan(make<Persistent>(ctx, c, buffers, layout));
}

}  // namespace agx
