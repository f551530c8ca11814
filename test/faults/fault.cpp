// libfault.so: a test-only MPI interposer that makes one MPI call fail on purpose and
// counts the MPI objects agx leaves behind. Preload it (mpirun -x LD_PRELOAD=...):
// agx calls the MPI_ names, so these definitions come first and call the PMPI_ ones;
// the calls libagx_pmpi.so also defines (MPI_Wait, MPI_Test*, MPI_Startall, ...) go on
// to the next definition (dlsym RTLD_NEXT), so that an interposer preloaded after this
// library still sees them.
//
// Injection: the K-th call of one function (counted from when it was armed) returns
// an MPI error class without doing anything (a request or type handle it would have
// made is set to null). Arm it with the environment, for any program:
//   FAULT_CALL=MPI_Isend FAULT_AT=3 [FAULT_CLASS=16]
// or from a test, found with dlsym: fault_arm("MPI_Isend", 3, MPI_ERR_OTHER).
// Faultable: MPI_Isend, MPI_Irecv, MPI_Testall, MPI_Waitall, MPI_Send_init,
// MPI_Recv_init, MPI_Startall, MPI_Type_create_hindexed, MPI_Type_commit.
//
// Accounting: requests in flight (fault_live_requests: made by MPI_Isend / MPI_Irecv,
// or persistent ones started by MPI_Startall, and neither complete nor freed),
// persistent requests not yet freed (fault_persistent_requests), and datatypes made by
// MPI_Type_create_hindexed not yet freed (fault_live_types). Whenever no agx call runs
// the first and the last must be 0; the second only counts while a plan lives.
// FAULT_REPORT=1 prints them at exit.

#include <mpi.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

struct State {
  std::mutex mutex;
  std::string armed;  // function name, empty when disarmed
  long at = 0;
  int error_class = MPI_ERR_OTHER;
  std::map<std::string, long> calls;  // per function, since it was last armed
  long injected = 0;
  struct Request {
    bool persistent = false;
    bool active = false;  // in flight: started and not yet complete
  };
  std::map<MPI_Request, Request> requests;  // made here and not yet freed
  std::set<MPI_Datatype> types;          // live hindexed types

  State() {
    const char* call = std::getenv("FAULT_CALL");
    const char* at_text = std::getenv("FAULT_AT");
    if (call != nullptr && *call != '\0') {
      armed = call;
      at = at_text != nullptr ? std::atol(at_text) : 1;
    }
    if (const char* c = std::getenv("FAULT_CLASS"); c != nullptr && *c != '\0')
      error_class = std::atoi(c);
  }
  ~State() {
    const char* report = std::getenv("FAULT_REPORT");
    if (report != nullptr && std::strcmp(report, "1") == 0)
      std::fprintf(stderr, "fault: %ld injected, %ld requests in flight, %ld persistent, %zu types\n",
                   injected, live(), persistent(), types.size());
  }
  long live() const {
    long n = 0;
    for (const auto& [handle, r] : requests) n += r.active ? 1 : 0;
    return n;
  }
  long persistent() const {
    long n = 0;
    for (const auto& [handle, r] : requests) n += r.persistent ? 1 : 0;
    return n;
  }
};

State& state() {
  static State s;
  return s;
}

// Counts a call of `name`; returns the error class to fail it with, or MPI_SUCCESS.
int count_call(const char* name) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const long k = ++s.calls[name];
  if (s.armed != name || k != s.at) return MPI_SUCCESS;
  s.armed.clear();
  ++s.injected;
  return s.error_class;
}

void track_request(MPI_Request r, bool persistent) {
  if (r == MPI_REQUEST_NULL) return;
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.requests[r] = {persistent, !persistent};
}

void mark_started(const MPI_Request* requests, int count) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  for (int i = 0; i < count; ++i)
    if (auto it = s.requests.find(requests[i]); it != s.requests.end()) it->second.active = true;
}

void forget_request(MPI_Request r) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.requests.erase(r);
}

// After a completion call that reported every request complete: the ones it turned
// into MPI_REQUEST_NULL are gone, persistent ones are inactive again.
void forget_completed(const std::vector<MPI_Request>& before, const MPI_Request* after) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  for (std::size_t i = 0; i < before.size(); ++i) {
    auto it = s.requests.find(before[i]);
    if (it == s.requests.end()) continue;
    if (after[i] == MPI_REQUEST_NULL) s.requests.erase(it);
    else it->second.active = false;
  }
}

}  // namespace

/// The next definition of MPI function `name` after this library (the interposer's,
/// else the MPI library's), or `fallback` (the PMPI_ function).
template <class F>
F next(const char* name, F fallback) {
  void* f = dlsym(RTLD_NEXT, name);
  return f != nullptr ? reinterpret_cast<F>(f) : fallback;
}

extern "C" {

/// The `at`-th call of `call` from now fails with `error_class`.
void fault_arm(const char* call, long at, int error_class) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.armed = call;
  s.at = at;
  s.error_class = error_class;
  s.calls[call] = 0;
}

void fault_disarm() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.armed.clear();
}

long fault_injected() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.injected;
}

long fault_live_requests() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.live();
}

long fault_persistent_requests() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.persistent();
}

long fault_live_types() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return static_cast<long>(s.types.size());
}

/// Calls of `call` since it was last armed (or since the start).
long fault_calls(const char* call) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.calls[call];
}

int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  if (const int e = count_call("MPI_Isend")) return *request = MPI_REQUEST_NULL, e;
  const int rc = PMPI_Isend(buf, count, type, dest, tag, comm, request);
  if (rc == MPI_SUCCESS) track_request(*request, false);
  return rc;
}

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  if (const int e = count_call("MPI_Irecv")) return *request = MPI_REQUEST_NULL, e;
  const int rc = PMPI_Irecv(buf, count, type, source, tag, comm, request);
  if (rc == MPI_SUCCESS) track_request(*request, false);
  return rc;
}

int MPI_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag,
                  MPI_Comm comm, MPI_Request* request) {
  if (const int e = count_call("MPI_Send_init")) return *request = MPI_REQUEST_NULL, e;
  const int rc = PMPI_Send_init(buf, count, type, dest, tag, comm, request);
  if (rc == MPI_SUCCESS) track_request(*request, true);
  return rc;
}

int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  if (const int e = count_call("MPI_Recv_init")) return *request = MPI_REQUEST_NULL, e;
  const int rc = PMPI_Recv_init(buf, count, type, source, tag, comm, request);
  if (rc == MPI_SUCCESS) track_request(*request, true);
  return rc;
}

int MPI_Startall(int count, MPI_Request requests[]) {
  if (const int e = count_call("MPI_Startall")) return e;
  const int rc = next("MPI_Startall", &PMPI_Startall)(count, requests);
  if (rc == MPI_SUCCESS) mark_started(requests, count);
  return rc;
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (const int e = count_call("MPI_Testall")) return *flag = 0, e;
  const std::vector<MPI_Request> before(requests, requests + count);
  const int rc = next("MPI_Testall", &PMPI_Testall)(count, requests, flag, statuses);
  if (rc == MPI_SUCCESS && *flag) forget_completed(before, requests);
  return rc;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (const int e = count_call("MPI_Waitall")) return e;
  const std::vector<MPI_Request> before(requests, requests + count);
  const int rc = next("MPI_Waitall", &PMPI_Waitall)(count, requests, statuses);
  if (rc == MPI_SUCCESS) forget_completed(before, requests);
  return rc;
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  const MPI_Request before = *request;
  const int rc = next("MPI_Wait", &PMPI_Wait)(request, status);
  if (rc == MPI_SUCCESS) forget_completed({before}, request);
  return rc;
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  const MPI_Request before = *request;
  const int rc = next("MPI_Test", &PMPI_Test)(request, flag, status);
  if (rc == MPI_SUCCESS && *flag) forget_completed({before}, request);
  return rc;
}

int MPI_Request_free(MPI_Request* request) {
  const MPI_Request before = *request;
  const int rc = next("MPI_Request_free", &PMPI_Request_free)(request);
  if (rc == MPI_SUCCESS) forget_request(before);
  return rc;
}

int MPI_Type_create_hindexed(int count, const int lengths[], const MPI_Aint displacements[],
                             MPI_Datatype old, MPI_Datatype* type) {
  if (const int e = count_call("MPI_Type_create_hindexed")) return *type = MPI_DATATYPE_NULL, e;
  const int rc = PMPI_Type_create_hindexed(count, lengths, displacements, old, type);
  if (rc == MPI_SUCCESS) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    s.types.insert(*type);
  }
  return rc;
}

int MPI_Type_commit(MPI_Datatype* type) {
  if (const int e = count_call("MPI_Type_commit")) return e;
  return PMPI_Type_commit(type);
}

int MPI_Type_free(MPI_Datatype* type) {
  const MPI_Datatype before = *type;
  const int rc = PMPI_Type_free(type);
  if (rc == MPI_SUCCESS) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    s.types.erase(before);
  }
  return rc;
}

}  // extern "C"
