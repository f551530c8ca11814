// The interposer's running and persistent requests (the mechanism is described in
// pending.hpp). One table holds every agx request of this process that has an MPI
// handle: nonblocking ones from start to completion, persistent ones from init to
// MPI_Request_free. A mutex guards it; progress only try-locks it, so a thread that
// finds another one advancing simply goes on testing its own requests.

#include "pmpi/pending.hpp"

#include <agx/encoded.hpp>
#include <agx/error.hpp>
#include <agx/request.hpp>

#include "core/idle_pool.hpp"
#include "core/mpi_check.hpp"
#include "pmpi/raise.hpp"
#include "pmpi/report.hpp"
#include "pmpi/settings.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace agx::pmpi {
namespace {

struct Pending {
  std::unique_ptr<PreparedCall> call;
  bool persistent = false;
  Request request;  ///< nonblocking
  EncodedRequest encoded;  ///< nonblocking under AGX_COMPRESS (call.hpp, start_compressed)
  bool is_encoded = false;
  /// Encoded: the algorithm the start forced (AGX_ALGO; automatic: none). The encoded
  /// result names only the algorithm that ran, so its radix is known only where forced.
  AlgorithmChoice encoded_forced;
  /// AGX_VERBOSE's line, said at the completion: the algorithm was not chosen at the
  /// start (encoded; a set-up still in flight).
  bool announce_at_completion = false;
  Announcement announcement;
  Plan plan;        ///< persistent
  MPI_Request handle = MPI_REQUEST_NULL;  ///< what the user holds
  int tag = 0;                            ///< persistent: of the self message
  bool running = false;
  bool active = false;       ///< persistent: started and not yet completed by the user
  bool user_freed = false;   ///< nonblocking: MPI_Request_free while running
  int error = MPI_SUCCESS;  ///< of the last start
  double started = 0;
};

std::mutex table_mutex;
std::vector<Pending*> table;         // every Pending with a live handle
std::atomic<int> running_count{0};   // how many of them are running
std::atomic<int> persistent_count{0};  // how many of them are persistent
// Nonblocking requests that failed, by handle, until a completion call reports them.
// (Generalized requests complete without error: an error there would go to
// MPI_COMM_WORLD's handler instead of the call's communicator.)
std::vector<std::pair<MPI_Request, int>> failed;
std::atomic<int> error_count{0};  // entries in `failed` plus persistent requests with an error
MPI_Comm self_comm = MPI_COMM_NULL;  // persistent handles live here
int next_tag = 0;

// Every nonblocking agx handle the user may still hold (from its start until MPI
// frees it), with its communicator: MPI_Cancel must recognise it even after the data
// has moved. Its own mutex: free_state runs inside MPI calls made under table_mutex.
// A vector, not a map: it keeps its capacity, so a start and a free allocate nothing
// (a handful of handles live at a time; a search of them is a few compares).
std::mutex handles_mutex;
std::vector<std::pair<MPI_Request, MPI_Comm>> nonblocking_handles;

void add_handle(MPI_Request handle, MPI_Comm comm) {
  std::lock_guard lock(handles_mutex);
  nonblocking_handles.reserve(16);  // (at the first start)
  nonblocking_handles.emplace_back(handle, comm);
}

// Idle nonblocking Pendings (core/idle_pool.hpp), reused by later starts with their
// PreparedCall (its vectors keep their capacity): a repeated MPI_Iallgather + MPI_Wait
// allocates nothing in agx (the generalized request is the MPI library's). Never
// destroyed: MPI may free a handle at MPI_Finalize, after static destructors could run.
IdlePool<Pending>& idle_pendings() {
  static auto* const idle = new IdlePool<Pending>;
  return *idle;
}

/// An idle Pending made ready for a nonblocking call of `c`, or a new one.
std::unique_ptr<Pending> take_pending(const GatherCall& c) {
  if (Pending* idle = idle_pendings().take()) {
    std::unique_ptr<Pending> p(idle);
    p->call->prepare(c);  // (throws for bad arguments: p is deleted, not pooled)
    return p;
  }
  auto p = std::make_unique<Pending>();
  p->call = std::make_unique<PreparedCall>(c);
  return p;
}

/// A nonblocking Pending whose handle MPI frees: reset and kept for a later start
/// (its request complete: the operation goes back to libagx's pool), or deleted.
void recycle(Pending* p) {
  p->request = Request();
  p->encoded = EncodedRequest();
  p->is_encoded = false;
  p->handle = MPI_REQUEST_NULL;
  p->running = false;
  p->user_freed = false;
  p->error = MPI_SUCCESS;
  p->started = 0;
  if (!idle_pendings().keep(p)) delete p;
}

// Generalized request callbacks. The state is the Pending, owned by MPI from the
// handle's completion on: free_state recycles it.
int query_state(void* state, MPI_Status* status) {
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  (void)state;
  return MPI_SUCCESS;
}
int free_state(void* state) {
  auto* p = static_cast<Pending*>(state);
  {
    std::lock_guard lock(handles_mutex);
    const auto it = std::find_if(nonblocking_handles.begin(), nonblocking_handles.end(),
                                 [&](const auto& h) { return h.first == p->handle; });
    if (it != nonblocking_handles.end()) nonblocking_handles.erase(it);
  }
  recycle(p);
  return MPI_SUCCESS;
}
int cancel_state(void*, int) { return MPI_SUCCESS; }  // collectives cannot be cancelled

void set_running(Pending& p, bool on) {
  if (p.running == on) return;
  p.running = on;
  running_count.fetch_add(on ? 1 : -1);
}

/// Completes the user's handle once agx has finished (or failed) the data movement.
/// A nonblocking Pending leaves the table here and belongs to MPI afterwards.
void complete(Pending& p) {
  if (p.error == MPI_SUCCESS) {
    p.call->stage_out();
    const AlgorithmChoice ran =
        p.persistent   ? p.plan.choice()
        : p.is_encoded ? what_ran(p.encoded.result().algorithm, p.encoded_forced)
                       : p.request.choice();
    record_call(ran, p.call->b.total_bytes, PMPI_Wtime() - p.started);
    if (p.announce_at_completion) announce_ran(p.announcement, ran);
  }
  set_running(p, false);
  if (p.error != MPI_SUCCESS) {
    error_count.fetch_add(1);
    if (!p.persistent) failed.emplace_back(p.handle, p.error);
  }
  if (p.persistent) {
    check_mpi(PMPI_Send(nullptr, 0, MPI_BYTE, 0, p.tag, self_comm), "MPI_Send");
  } else {
    table.erase(std::find(table.begin(), table.end(), &p));
    MPI_Request handle = p.handle;
    const bool freed = p.user_freed;  // read before: once complete, a wait may free p
    check_mpi(PMPI_Grequest_complete(handle), "MPI_Grequest_complete");
    // The user freed it while it ran: the handle is agx's to free now (free_state
    // deletes p). MPI_Request_free on a generalized request before it completes may
    // run free_state at once (MPICH does), so agx held it back until here.
    if (freed) check_mpi(PMPI_Request_free(&handle), "MPI_Request_free");
  }
}

/// AGX_VERBOSE's line for a start: now where the algorithm is chosen, else at completion.
void announce_or_wait(Pending& p) {
  const AlgorithmChoice a = p.persistent ? p.plan.choice()
                            : p.is_encoded ? AlgorithmChoice{}
                                           : p.request.choice();
  p.announce_at_completion = a.id == Algorithm::automatic && verbose();
  if (p.announce_at_completion)
    p.announcement =
        prepare_announcement(p.call->c.comm, p.call->c.function, p.call->b.total_bytes);
  else
    announce(p.call->c.comm, p.call->c.function, a, p.call->b.total_bytes);
}

/// One test of a running Pending; completes it when done. Errors are recorded and
/// raised through the communicator (which aborts under MPI_ERRORS_ARE_FATAL).
void advance(Pending& p) {
  bool done = false;
  try {
    done = p.persistent ? p.plan.test() : p.is_encoded ? p.encoded.test() : p.request.test();
  } catch (const Error& e) {
    p.error = raise_error(p.call->c.comm, e.error_class(),
                          std::string(p.call->c.function) + ": " + e.what());
    done = true;
  }
  if (done) complete(p);
}

Pending* find_persistent(MPI_Request handle) {
  for (Pending* p : table)
    if (p->persistent && p->handle == handle) return p;
  return nullptr;
}

/// Advances every running Pending once (backwards: complete() may remove entries).
void advance_all() {
  for (std::size_t i = table.size(); i-- > 0;)
    if (i < table.size() && table[i]->running) advance(*table[i]);
}

/// Advances everything until `done()`, letting other threads in between rounds.
template <class Done>
void advance_until(Done done, std::unique_lock<std::mutex>& lock) {
  while (true) {
    advance_all();
    if (done()) return;
    lock.unlock();
    sched_yield();
    lock.lock();
  }
}

}  // namespace

int start_nonblocking(const GatherCall& c, MPI_Request* request) noexcept {
  const InsideAgx guard;
  return guarded(c.comm, c.function, [&] {
    if (request == nullptr) throw Error(MPI_ERR_REQUEST, "agx: request pointer is NULL");
    *request = MPI_REQUEST_NULL;
    std::unique_ptr<Pending> p = take_pending(c);
    p->started = PMPI_Wtime();
    const PreparedCall& call = *p->call;
    call.stage_in();
    const Options options = pick_nonblocking_options(call);
    if (std::optional<EncodedRequest> e = start_compressed(call, options)) {
      p->encoded = std::move(*e);
      p->is_encoded = true;  // its algorithm is chosen once the encoded sizes are in
      p->encoded_forced = AlgorithmChoice{options.algorithm, options.radix};
    } else {
      p->request = start_allgather_bytes(c.comm, call.buffers, call.layout, options);
    }
    announce_or_wait(*p);
    check_mpi(PMPI_Grequest_start(query_state, free_state, cancel_state, p.get(), &p->handle),
              "MPI_Grequest_start");
    *request = p->handle;
    add_handle(p->handle, c.comm);
    std::lock_guard lock(table_mutex);
    Pending& mine = *p.release();
    table.push_back(&mine);
    set_running(mine, true);
    advance(mine);  // small calls often finish here
    return MPI_SUCCESS;
  });
}

int init_persistent(const GatherCall& c, MPI_Request* request) noexcept {
  const InsideAgx guard;
  return guarded(c.comm, c.function, [&] {
    if (request == nullptr) throw Error(MPI_ERR_REQUEST, "agx: request pointer is NULL");
    *request = MPI_REQUEST_NULL;
    auto p = std::make_unique<Pending>();
    p->persistent = true;
    p->call = std::make_unique<PreparedCall>(c);
    const PreparedCall& call = *p->call;
    p->plan = plan_allgather_bytes(c.comm, call.buffers, call.layout,
                                   pick_nonblocking_options(call));
    announce_or_wait(*p);
    std::lock_guard lock(table_mutex);
    if (self_comm == MPI_COMM_NULL)
      check_mpi(PMPI_Comm_dup(MPI_COMM_SELF, &self_comm), "MPI_Comm_dup");
    p->tag = next_tag;
    next_tag = (next_tag + 1) % 32768;  // MPI guarantees tags up to 32767
    check_mpi(PMPI_Recv_init(nullptr, 0, MPI_BYTE, 0, p->tag, self_comm, &p->handle),
              "MPI_Recv_init");
    *request = p->handle;
    table.push_back(p.release());
    persistent_count.fetch_add(1);
    return MPI_SUCCESS;
  });
}

bool must_progress() noexcept {
  return running_count.load(std::memory_order_relaxed) > 0 && !inside_agx();
}

void progress_requests() noexcept {
  const InsideAgx guard;
  std::unique_lock lock(table_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;
  try {
    advance_all();
  } catch (...) {  // a handle that cannot be completed: MPI itself is failing
  }
}

bool start_if_persistent(MPI_Request* request, int* rc) noexcept {
  if (request == nullptr || persistent_count.load() == 0 || inside_agx()) return false;
  const InsideAgx guard;
  std::lock_guard lock(table_mutex);
  Pending* p = find_persistent(*request);
  if (p == nullptr) return false;
  *rc = guarded(p->call->c.comm, p->call->c.function, [&] {
    // Decided from this rank's own state: active from MPI_Start until a completion call
    // (MPI_Wait, MPI_Test, ...) returned it, whether or not its data has moved yet.
    if (p->active)
      throw Error(MPI_ERR_REQUEST, "agx: MPI_Start on a persistent request that is active "
                                   "(complete it with MPI_Wait or MPI_Test first)");
    if (p->error != MPI_SUCCESS) error_count.fetch_sub(1);  // never reported: replaced
    p->error = MPI_SUCCESS;
    p->started = PMPI_Wtime();
    p->call->stage_in();
    check_mpi(PMPI_Start(&p->handle), "MPI_Start");
    p->active = true;
    set_running(*p, true);
    try {
      p->plan.start();
    } catch (...) {  // nothing moved: let the handle complete, then report
      set_running(*p, false);
      p->active = false;
      check_mpi(PMPI_Send(nullptr, 0, MPI_BYTE, 0, p->tag, self_comm), "MPI_Send");
      throw;
    }
    advance(*p);
    return MPI_SUCCESS;
  });
  return true;
}

bool free_if_persistent(MPI_Request* request, int* rc) noexcept {
  if (request == nullptr || persistent_count.load() == 0 || inside_agx()) return false;
  const InsideAgx guard;
  std::unique_lock lock(table_mutex);
  Pending* p = find_persistent(*request);
  if (p == nullptr) return false;
  *rc = guarded(p->call->c.comm, p->call->c.function, [&] {
    // MPI lets a running request be freed; agx finishes it first
    advance_until([p] { return !p->running; }, lock);
    table.erase(std::find(table.begin(), table.end(), p));
    persistent_count.fetch_sub(1);
    if (p->error != MPI_SUCCESS) error_count.fetch_sub(1);
    const std::unique_ptr<Pending> owned(p);
    return PMPI_Request_free(request);  // the completed self receive
  });
  return true;
}

bool free_if_running(MPI_Request* request) noexcept {
  if (request == nullptr || *request == MPI_REQUEST_NULL || inside_agx() ||
      running_count.load() == 0)
    return false;
  std::lock_guard lock(table_mutex);
  for (Pending* p : table)
    if (!p->persistent && p->handle == *request && p->running) {
      p->user_freed = true;  // complete() frees the handle once the data has moved
      *request = MPI_REQUEST_NULL;
      return true;
    }
  return false;
}

bool cancel_refused(MPI_Request request, int* rc) noexcept {
  if (request == MPI_REQUEST_NULL || inside_agx()) return false;
  MPI_Comm comm = MPI_COMM_NULL;
  const char* function = "MPI_Cancel";
  {
    std::lock_guard lock(handles_mutex);
    for (const auto& [handle, on] : nonblocking_handles)
      if (handle == request) comm = on;
  }
  if (comm == MPI_COMM_NULL && persistent_count.load() > 0) {
    std::lock_guard lock(table_mutex);
    if (const Pending* p = find_persistent(request)) comm = p->call->c.comm;
  }
  if (comm == MPI_COMM_NULL) return false;
  *rc = raise_error(comm, MPI_ERR_REQUEST,
                    std::string(function) + ": agx: a collective request (MPI_Iallgather(v) or "
                                            "a persistent all-gather) cannot be cancelled");
  return true;
}

bool persistent_requests() noexcept { return persistent_count.load() > 0; }

void note_completed(MPI_Request request) noexcept {
  if (request == MPI_REQUEST_NULL || persistent_count.load() == 0 || inside_agx()) return;
  std::lock_guard lock(table_mutex);
  if (Pending* p = find_persistent(request)) p->active = false;
}

int request_error(MPI_Request request) noexcept {
  if (request == MPI_REQUEST_NULL || error_count.load() == 0 || inside_agx()) return MPI_SUCCESS;
  std::lock_guard lock(table_mutex);
  for (auto it = failed.begin(); it != failed.end(); ++it)
    if (it->first == request) {
      const int error = it->second;
      failed.erase(it);
      error_count.fetch_sub(1);
      return error;
    }
  Pending* p = find_persistent(request);
  if (p == nullptr || p->running || p->error == MPI_SUCCESS) return MPI_SUCCESS;
  const int error = p->error;
  p->error = MPI_SUCCESS;
  error_count.fetch_sub(1);
  return error;
}

bool errors_pending() noexcept { return error_count.load() > 0; }

void forget_error(MPI_Request request) noexcept { (void)request_error(request); }

void finish_requests() noexcept {
  const InsideAgx guard;
  try {
    std::unique_lock lock(table_mutex);
    advance_until([] { return running_count.load() == 0; }, lock);
    if (self_comm != MPI_COMM_NULL) PMPI_Comm_free(&self_comm);
  } catch (...) {  // MPI_Finalize goes on regardless
  }
}

}  // namespace agx::pmpi
