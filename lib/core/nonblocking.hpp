#pragma once
// The operations behind agx::Request and agx::Plan (include/agx/request.hpp), and
// the progress engine that may advance them from a background thread.
//
// An Operation owns a copy of the layout, its algorithm and its state machine. Every
// entry point locks the operation's mutex, so the progress thread (which only ever
// try-locks) and the owning thread can both advance it. Errors raised while the
// progress thread advances an operation are kept and rethrown to the owner.

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>
#include <agx/options.hpp>
#include <agx/request.hpp>

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

namespace agx {

class CommContext;
class Execution;

/// An owned copy of a Layout (a Layout itself only points at its arrays).
class OwnedLayout {
 public:
  explicit OwnedLayout(const Layout& l) { assign(l); }
  OwnedLayout(const OwnedLayout&) = delete;
  OwnedLayout& operator=(const OwnedLayout&) = delete;
  const Layout& get() const { return layout_; }
  /// Copies `l` instead (the arrays keep their capacity: no allocation for a layout of
  /// no more ranks than before, none for a uniform one).
  void assign(const Layout& l);

 private:
  std::vector<std::size_t> bytes_, offsets_;
  Layout layout_;
};

namespace detail {

class Operation {
 public:
  Operation(const AlgorithmChoice& a, const Layout& layout) : choice_(a), layout_(layout) {}
  virtual ~Operation() = default;
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  /// Starts one all-gather (registers with the progress thread when it runs).
  void start();
  /// Advances without blocking; true when no start is running.
  bool test();
  /// Blocks until no start is running.
  void wait();
  /// Advances if nobody else holds the operation (the progress thread's call).
  void try_progress() noexcept;
  /// The end of its request or plan (OperationDeleter, once unregistered): deletes it,
  /// or keeps it for another call (api/entry.cpp's single calls go back to a pool).
  virtual void dispose() noexcept { delete this; }

  bool active() const { return active_; }
  Algorithm algorithm() const { return choice_.id; }
  const AlgorithmChoice& choice() const { return choice_; }
  std::uint64_t starts() const { return starts_; }

 protected:
  virtual void do_start() = 0;  ///< posts the first round (or runs a blocking path)
  virtual bool do_test() = 0;   ///< true when the current start is complete
  /// Whether wait() may spin briefly before it yields the core (its ranks' node has a
  /// core per rank): there a sched_yield costs more than the peer's answer takes.
  virtual bool may_spin() const { return false; }
  const Layout& layout() const { return layout_.get(); }
  /// An operation taken again from a pool (not active): a new call's algorithm and
  /// layout, no start counted, no failure kept.
  void reuse(const AlgorithmChoice& a, const Layout& layout);
  /// The algorithm chosen after the operation was made (a call that waited for its
  /// communicator's set-up, api/entry.cpp).
  void set_choice(const AlgorithmChoice& a) { choice_ = a; }

 private:
  void set_active(bool on);
  void rethrow_failure();

  std::mutex mutex_;
  AlgorithmChoice choice_;
  OwnedLayout layout_;
  std::atomic<bool> active_{false};
  std::uint64_t starts_ = 0;
  std::exception_ptr failure_;  // from the progress thread, rethrown to the owner
};

/// Progress engine: the set of operations the progress thread advances.
void progress_register(Operation* op);
void progress_unregister(Operation* op) noexcept;
/// Advances every registered operation nobody else holds (try_progress on each);
/// returns how many were running.
int progress_all() noexcept;
/// Whether any operation of this process is running (a cheap check for blocking calls).
bool progress_pending() noexcept;
/// Counts operations becoming active (+1) or inactive (-1).
void progress_count_active(int delta) noexcept;
/// Starts the thread when AGX_PROGRESS_THREAD=1 asks for it (first start only).
void progress_from_environment();

}  // namespace detail

/// Calls `done` until it returns true, advancing this process's running operations
/// between calls: a blocking wait (an agreement, a device call) during which a peer, or
/// this rank's own watermarks, may wait for one of them.
template <class Done>
void progress_until(Done done) {
  while (!done()) {
    detail::progress_all();
    sched_yield();
  }
}

/// Waits for the execution of a blocking call. While nonblocking calls of this process
/// run, advances them too: a peer, or a flag watermark of this very rank, may wait for
/// one of them (start(A); blocking call; wait(A)).
void wait_blocking(Execution& e);
}  // namespace agx
