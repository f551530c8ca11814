/* MPICH 4.0 (ch4:ucx) with UCX's TCP transport hangs now and then in MPI_Finalize between
 * nodes; this LD_PRELOAD library removes the hang (docs/cluster.md, "MPICH's finalize
 * hang"). No agx code: it is for MPICH jobs on the cluster, agx or not.
 *
 * Why it hangs. MPICH's finalize closes every endpoint with ucp_disconnect_nb (flush
 * mode), progresses its worker until those closes complete, then waits in a PMI barrier
 * without progressing UCX. UCX's TCP flush is a remote one: an endpoint that has sent
 * anything since its last flush sends a zero-length PUT and completes only when the peer
 * answers with an ACK. A rank whose own closes complete early enters the barrier; a PUT
 * that reaches it afterwards is never answered, and its sender spins in
 * uct_tcp_iface_progress while everyone else waits in the barrier. Seen on the cluster:
 * the stuck rank's socket to a rank already in the barrier held exactly one unread PUT
 * request (25 bytes: TCP AM header 5 + PUT header 20).
 *
 * What this does. From the first ucp_disconnect_nb on (finalize has begun) a thread
 * progresses the process's UCX workers until ucp_worker_destroy, so that a rank in the
 * barrier still answers its peers (what Open MPI's UCX code does in its own finalize
 * fence). MPICH creates its workers UCS_THREAD_MODE_SERIALIZED, so every call that MPICH
 * makes on them meanwhile (progress, disconnect, request checks and releases) runs under
 * the same mutex as the thread. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

enum { max_workers = 64 };

static pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER;
static ucp_worker_h workers_[max_workers];
static int worker_count_;
static pthread_t thread_;
static atomic_int running_;  // 1 while the progress thread runs
static atomic_int stop_;

// libucp's own definitions, looked up on first use (the preload may also reach processes
// without UCX, which never call these).
static struct {
  __typeof__(&ucp_worker_create) worker_create;
  __typeof__(&ucp_worker_destroy) worker_destroy;
  __typeof__(&ucp_worker_progress) worker_progress;
  __typeof__(&ucp_disconnect_nb) disconnect_nb;
  __typeof__(&ucp_request_is_completed) request_is_completed;
  __typeof__(&ucp_request_check_status) request_check_status;
  __typeof__(&ucp_request_release) request_release;
  __typeof__(&ucp_request_free) request_free;
} next_;

static void find_next(void* slot, size_t size, const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == NULL) {
    fprintf(stderr, "ucx_finalize_progress: %s not found (not a UCX program?)\n", name);
    abort();
  }
  memcpy(slot, &f, size);  // object to function pointer without a cast ISO C forbids
}

#define NEXT(field, name) \
  (next_.field != NULL ? next_.field : (find_next(&next_.field, sizeof next_.field, name), next_.field))

static void* progress_loop(void* arg) {
  (void)arg;
  const struct timespec pause = {0, 100 * 1000};  // 100 us: the rank otherwise only waits
  while (!atomic_load(&stop_)) {
    pthread_mutex_lock(&lock_);
    for (int i = 0; i < worker_count_; ++i) NEXT(worker_progress, "ucp_worker_progress")(workers_[i]);
    pthread_mutex_unlock(&lock_);
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static void start_progress(void) {  // caller holds lock_
  if (atomic_load(&running_) || worker_count_ == 0) return;
  atomic_store(&stop_, 0);
  if (pthread_create(&thread_, NULL, progress_loop, NULL) == 0) atomic_store(&running_, 1);
  else fprintf(stderr, "ucx_finalize_progress: no progress thread; MPI_Finalize may hang\n");
}

static void stop_progress(void) {
  if (!atomic_load(&running_)) return;
  atomic_store(&stop_, 1);
  pthread_join(thread_, NULL);
  atomic_store(&running_, 0);
}

// Runs CALL under lock_ while the thread runs (MPICH's calls stay serialized with it).
#define SERIALIZED(CALL)                                       \
  do {                                                         \
    if (atomic_load(&running_)) {                              \
      pthread_mutex_lock(&lock_);                              \
      CALL;                                                    \
      pthread_mutex_unlock(&lock_);                            \
    } else {                                                   \
      CALL;                                                    \
    }                                                          \
  } while (0)

ucs_status_t ucp_worker_create(ucp_context_h context, const ucp_worker_params_t* params,
                               ucp_worker_h* worker_p) {
  ucs_status_t status = NEXT(worker_create, "ucp_worker_create")(context, params, worker_p);
  if (status == UCS_OK) {
    pthread_mutex_lock(&lock_);
    if (worker_count_ < max_workers) workers_[worker_count_++] = *worker_p;
    pthread_mutex_unlock(&lock_);
  }
  return status;
}

void ucp_worker_destroy(ucp_worker_h worker) {
  stop_progress();  // MPICH destroys its workers after the barrier: no peer waits any more
  pthread_mutex_lock(&lock_);
  for (int i = 0; i < worker_count_; ++i) {
    if (workers_[i] == worker) workers_[i--] = workers_[--worker_count_];
  }
  pthread_mutex_unlock(&lock_);
  NEXT(worker_destroy, "ucp_worker_destroy")(worker);
}

ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep) {
  ucs_status_ptr_t request;
  pthread_mutex_lock(&lock_);
  request = NEXT(disconnect_nb, "ucp_disconnect_nb")(ep);
  start_progress();
  pthread_mutex_unlock(&lock_);
  return request;
}

unsigned ucp_worker_progress(ucp_worker_h worker) {
  unsigned events = 0;
  SERIALIZED(events = NEXT(worker_progress, "ucp_worker_progress")(worker));
  return events;
}

int ucp_request_is_completed(void* request) {
  int done = 0;
  SERIALIZED(done = NEXT(request_is_completed, "ucp_request_is_completed")(request));
  return done;
}

ucs_status_t ucp_request_check_status(void* request) {
  ucs_status_t status = UCS_OK;
  SERIALIZED(status = NEXT(request_check_status, "ucp_request_check_status")(request));
  return status;
}

void ucp_request_release(void* request) { SERIALIZED(NEXT(request_release, "ucp_request_release")(request)); }

void ucp_request_free(void* request) { SERIALIZED(NEXT(request_free, "ucp_request_free")(request)); }
