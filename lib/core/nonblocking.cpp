// Nonblocking all-gather: the Operation state shared by single calls and plans, and the
// public agx::Request / agx::Plan members (include/agx/request.hpp). The operations
// themselves, and the entry points that make them, are lib/api's (api/entry.cpp,
// api/dispatch.cpp): they choose among lib/core's, lib/hier's and lib/cuda's paths.

#include "core/nonblocking.hpp"
#include "core/spin.hpp"

#include <agx/error.hpp>
#include <agx/request.hpp>

#include <algorithm>


#include <sched.h>

#include <bit>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

namespace agx {

void OwnedLayout::assign(const Layout& l) {
  bytes_.clear();
  offsets_.clear();
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

void Operation::reuse(const AlgorithmChoice& a, const Layout& layout) {
  choice_ = a;
  layout_.assign(layout);
  starts_ = 0;
  failure_ = nullptr;
}

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
  // A short spin first where every rank has a core, as the node paths' flag waits do
  // (hier/wait.hpp): a peer on another core is often well under a microsecond away, and
  // a sched_yield costs about that much by itself. (Measured at N = 2, 8 B nonblocking
  // shared_memory: 0.92-1.09 us against 1.00-1.21 us in six alternating runs. With ranks
  // sharing cores the spin kept the peer off its core: 9.3-10.1 us against 4.3-5.7.)
  if (may_spin())
    for (int i = 0; i < 64; ++i) {
      if (test()) return;
      cpu_relax();
    }
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

void OperationDeleter::operator()(Operation* op) const noexcept {
  progress_unregister(op);  // the progress thread no longer touches it
  op->dispose();
}

}  // namespace detail

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
AlgorithmChoice Request::choice() const { return op_ ? op_->choice() : AlgorithmChoice{}; }

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
AlgorithmChoice Plan::choice() const { return op_ ? op_->choice() : AlgorithmChoice{}; }
std::uint64_t Plan::starts() const { return op_ ? op_->starts() : 0; }

}  // namespace agx
