// The progress engine of nonblocking calls: every live Operation is registered here;
// progress_all() advances each one nobody else holds. It runs from every test()/wait()
// (so requests may complete in any order) and from blocking calls while requests are
// running, and optionally from a progress thread (set_progress_thread,
// AGX_PROGRESS_THREAD=1), which needs MPI_THREAD_MULTIPLE and stops at MPI_Finalize.
//
// Locks: registry_mutex, then an operation's mutex by try_lock only — never the other
// way round, so the owner and the thread cannot deadlock. registry_mutex is recursive:
// an operation advanced here may start another one (a call that waited for its
// communicator's set-up, api/entry.cpp), whose start may advance the others.

#include "core/nonblocking.hpp"

#include <agx/error.hpp>
#include <agx/request.hpp>

#include "core/config.hpp"
#include "core/executor.hpp"
#include "core/mpi_check.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <mutex>
#include <thread>

namespace agx {
namespace detail {
namespace {

std::recursive_mutex registry_mutex;
std::vector<Operation*> registry;
std::atomic<int> running{0};

std::mutex thread_mutex;  // guards worker start/stop
std::thread worker;
std::atomic<bool> worker_stop{false};
std::atomic<bool> worker_running{false};

void worker_main() {
  while (!worker_stop.load()) {
    if (progress_all() > 0)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // idle: stay off the CPU
  }
}

void stop_worker() {
  std::lock_guard lock(thread_mutex);
  if (!worker.joinable()) return;
  worker_stop = true;
  worker.join();
  worker_running = false;
}

// MPI_Finalize deletes MPI_COMM_SELF's attributes first: the thread stops before MPI does.
int at_finalize(MPI_Comm, int, void*, void*) {
  stop_worker();
  return MPI_SUCCESS;
}

void stop_at_finalize() {
  static const bool registered = [] {
    int keyval = MPI_KEYVAL_INVALID;
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &keyval, nullptr),
              "MPI_Comm_create_keyval");
    check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr), "MPI_Comm_set_attr");
    return true;
  }();
  (void)registered;
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    default: return "MPI_THREAD_MULTIPLE";
  }
}

}  // namespace

void progress_register(Operation* op) {
  std::lock_guard lock(registry_mutex);
  registry.push_back(op);
}

void progress_unregister(Operation* op) noexcept {
  std::lock_guard lock(registry_mutex);
  registry.erase(std::remove(registry.begin(), registry.end(), op), registry.end());
}

int progress_all() noexcept {
  if (running.load(std::memory_order_relaxed) == 0) return 0;
  std::lock_guard lock(registry_mutex);
  int active = 0;
  for (std::size_t i = 0; i < registry.size(); ++i) {  // (by index: an operation may register another)
    Operation* op = registry[i];
    op->try_progress();
    active += op->active() ? 1 : 0;
  }
  return active;
}

bool progress_pending() noexcept { return running.load(std::memory_order_relaxed) > 0; }

void progress_count_active(int delta) noexcept { running.fetch_add(delta); }

void progress_from_environment() {
  if (config().progress_thread && !worker_running.load()) set_progress_thread(true);
}

}  // namespace detail

void set_progress_thread(bool on) {
  if (!on) {
    detail::stop_worker();
    return;
  }
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw Error(MPI_ERR_OTHER, "agx: the progress thread needs MPI to be initialized");
  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  if (provided != MPI_THREAD_MULTIPLE)
    throw Error(MPI_ERR_OTHER,
                std::string("agx: the progress thread (set_progress_thread, "
                            "AGX_PROGRESS_THREAD=1) needs MPI_THREAD_MULTIPLE, but MPI provides ") +
                    detail::thread_level_name(provided) +
                    "; initialize with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)");
  detail::stop_at_finalize();
  std::lock_guard lock(detail::thread_mutex);
  if (detail::worker.joinable()) return;
  detail::worker_stop = false;
  detail::worker = std::thread(detail::worker_main);
  detail::worker_running = true;
}

bool progress_thread_running() { return detail::worker_running.load(); }

void wait_blocking(Execution& e) {
  if (!detail::progress_pending()) {
    e.wait();
    return;
  }
  progress_until([&] { return e.test(); });
}

}  // namespace agx
