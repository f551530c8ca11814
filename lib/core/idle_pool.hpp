#pragma once
// IdlePool: objects an operation is done with, kept (at most Limit) for the next start
// to take, so that a repeated start constructs and allocates nothing. Thread-safe: a
// request may be freed on another thread than the next start. Its users: the entry
// points' nonblocking calls (api/entry.cpp), a node schedule's nonblocking and
// persistent calls (hier/node_call.cpp) and the interposer's pending requests
// (pmpi/pending.cpp).
//
// The pool never deletes what it keeps by itself: its owner drains it where the objects
// may go (a node schedule's calls go with the schedule), and a pool that must outlive
// static destruction (MPI may free a request at MPI_Finalize) is made with new and
// never destroyed.

#include <cstddef>
#include <mutex>
#include <vector>

namespace agx {

template <class T, std::size_t Limit = 16>
class IdlePool {
 public:
  static constexpr std::size_t limit = Limit;

  IdlePool() { idle_.reserve(Limit); }  // keep() never allocates
  IdlePool(const IdlePool&) = delete;
  IdlePool& operator=(const IdlePool&) = delete;

  /// An idle object, the caller's from now on; null when none is kept.
  T* take() {
    std::lock_guard lock(mutex_);
    if (idle_.empty()) return nullptr;
    T* t = idle_.back();
    idle_.pop_back();
    return t;
  }

  /// Keeps `t` for a later take(); false when `limit` are kept already (then `t` stays
  /// the caller's).
  bool keep(T* t) {
    std::lock_guard lock(mutex_);
    if (idle_.size() >= Limit) return false;
    idle_.push_back(t);
    return true;
  }

  /// Hands every kept object to `destroy` (the owner's teardown).
  template <class Destroy>
  void drain(Destroy&& destroy) {
    std::lock_guard lock(mutex_);
    for (T* t : idle_) destroy(t);
    idle_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<T*> idle_;
};

}  // namespace agx
