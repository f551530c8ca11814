#include "core/comm_context.hpp"

#include "core/config.hpp"
#include "core/executor.hpp"
#include "core/mpi_check.hpp"
#include "core/planner.hpp"
#include "core/select.hpp"
#include "core/tls.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>

namespace agx {
namespace {

std::mutex registry_mutex;
std::set<MPI_Comm> live_comms;  // user communicators that carry a context
int context_keyval = MPI_KEYVAL_INVALID;

// The last context this thread looked up, reused while no context has been deleted
// since (a freed communicator's handle may come back for a new one): repeated calls on
// one communicator skip MPI_Comm_get_attr, a hash lookup inside the MPI library.
std::atomic<std::uint64_t> deletions{0};
// A thread's last answer of a lookup, valid while `stamp` (a counter bumped by every
// change the lookup depends on) is unchanged.
struct LastLookup {
  MPI_Comm comm = MPI_COMM_NULL;
  CommContext* ctx = nullptr;
  std::uint64_t stamp = ~std::uint64_t{0};
};
AGX_FAST_TLS thread_local LastLookup last;  // find(): stamp = deletions
// (AGX_FAST_TLS, core/tls.hpp: no __tls_get_addr per call)

CommContext* remembered(MPI_Comm user_comm) {
  return last.comm == user_comm && last.stamp == deletions.load(std::memory_order_acquire)
             ? last.ctx : nullptr;
}

void remember(MPI_Comm user_comm, CommContext* ctx) {
  last = {user_comm, ctx, deletions.load(std::memory_order_acquire)};
}

// Private communicators of the live contexts (of_private), and a generation counter
// bumped whenever a context is made or destroyed: a thread's last answer stays valid
// while the generation is unchanged.
std::map<MPI_Comm, CommContext*> private_comms;
std::atomic<std::uint64_t> private_generation{0};
AGX_FAST_TLS thread_local LastLookup last_private;  // of_private(): stamp = private_generation

// Runs first thing in MPI_Finalize (attributes of MPI_COMM_SELF are deleted first):
// releases the contexts of communicators the user never freed.
int at_finalize(MPI_Comm, int, void*, void*) {
  std::set<MPI_Comm> comms;
  {
    std::lock_guard lock(registry_mutex);
    comms = live_comms;
  }
  for (MPI_Comm c : comms) MPI_Comm_delete_attr(c, context_keyval);
  MPI_Comm_free_keyval(&context_keyval);
  return MPI_SUCCESS;
}

int ensure_keyval() {
  static const int keyval = [] {
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_context, &context_keyval,
                                     nullptr),
              "MPI_Comm_create_keyval");
    int finalize_keyval = MPI_KEYVAL_INVALID;
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &finalize_keyval, nullptr),
              "MPI_Comm_create_keyval");
    check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, finalize_keyval, nullptr), "MPI_Comm_set_attr");
    return context_keyval;
  }();
  return keyval;
}

}  // namespace

int delete_context(MPI_Comm user_comm, int, void* attr, void*) {
  deletions.fetch_add(1, std::memory_order_acq_rel);  // before the context can go
  {
    std::lock_guard lock(registry_mutex);
    live_comms.erase(user_comm);
  }
  delete static_cast<std::shared_ptr<CommContext>*>(attr);  // pending calls keep theirs
  return MPI_SUCCESS;
}

CommContext& CommContext::attach(MPI_Comm user_comm, MPI_Comm comm, Selector* selector,
                                 std::unique_ptr<NodeState> node) {
  const int keyval = ensure_keyval();
  auto* holder = new std::shared_ptr<CommContext>(new CommContext(comm, selector, std::move(node)));
  CommContext& ctx = **holder;
  try {
    check_mpi(MPI_Comm_set_attr(user_comm, keyval, holder), "MPI_Comm_set_attr");
  } catch (...) {
    delete holder;
    throw;
  }
  std::lock_guard lock(registry_mutex);
  live_comms.insert(user_comm);
  remember(user_comm, &ctx);
  return ctx;
}

std::shared_ptr<CommContext> CommContext::detached(MPI_Comm comm, Selector* selector,
                                                   std::unique_ptr<NodeState> node) {
  return std::shared_ptr<CommContext>(new CommContext(comm, selector, std::move(node)));
}

std::uint64_t CommContext::deletions() { return agx::deletions.load(std::memory_order_acquire); }

CommContext* CommContext::find(MPI_Comm user_comm) {
  if (user_comm == MPI_COMM_NULL || context_keyval == MPI_KEYVAL_INVALID) return nullptr;
  if (CommContext* ctx = remembered(user_comm)) return ctx;
  void* attr = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(user_comm, context_keyval, &attr, &found), "MPI_Comm_get_attr");
  if (!found) return nullptr;
  CommContext* ctx = static_cast<std::shared_ptr<CommContext>*>(attr)->get();
  remember(user_comm, ctx);
  return ctx;
}

CommContext* CommContext::of_private(MPI_Comm comm) {
  const std::uint64_t g = private_generation.load(std::memory_order_acquire);
  if (last_private.comm == comm && last_private.stamp == g) return last_private.ctx;
  std::lock_guard lock(registry_mutex);
  const auto it = private_comms.find(comm);
  CommContext* ctx = it == private_comms.end() ? nullptr : it->second;
  last_private = {comm, ctx, private_generation.load(std::memory_order_acquire)};
  return ctx;
}

CommContext::CommContext(MPI_Comm comm, Selector* selector, std::unique_ptr<NodeState> node)
    : comm_(comm), descriptors_(config().descriptor_cache), selector_(selector),
      node_(std::move(node)) {
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  std::lock_guard lock(registry_mutex);
  private_comms[comm_] = this;
  private_generation.fetch_add(1, std::memory_order_acq_rel);
}

CommContext::~CommContext() {
  {
    std::lock_guard lock(registry_mutex);
    private_generation.fetch_add(1, std::memory_order_acq_rel);
    const auto it = private_comms.find(comm_);
    if (it != private_comms.end() && it->second == this) private_comms.erase(it);
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // a request outlived MPI_Finalize: MPI has released everything
  node_.reset();  // frees communicators derived from comm_ and unmaps shared memory
  free_comm(comm_);  // kept allocated after an abandoned round (core/executor.hpp)
}

const Schedule& CommContext::schedule(const AlgorithmChoice& a) {
  auto it = schedules_.find(a);
  if (it == schedules_.end())
    it = schedules_.emplace(a, planner_for(a.id).plan({size_, rank_, a.radix})).first;
  return it->second;
}

const Schedule& CommContext::staged_schedule(const AlgorithmChoice& a) {
  auto it = staged_.find(a);
  if (it == staged_.end()) it = staged_.emplace(a, stage_on_device(schedule(a))).first;
  return it->second;
}

std::shared_ptr<CompiledSchedule> CommContext::compiled(const Schedule& schedule,
                                                       const Layout& layout, bool in_place,
                                                       std::size_t max_message_bytes) {
  auto c = descriptors_.find(schedule, layout, in_place, max_message_bytes);
  if (!c) {
    // Only this context's own schedules, which live as long as it: a cached entry's
    // schedule address then always names the same schedule.
    bool own = false;
    for (const auto* cache : {&schedules_, &staged_})
      for (const auto& [choice, s] : *cache) own = own || &s == &schedule;
    if (!own) return nullptr;
    c = descriptors_.compile(schedule, layout, in_place, max_message_bytes);
  }
  if (c && !c->usable()) c.reset();
  return c;
}

void SelectorDeleter::operator()(Selector* s) const { delete s; }

int CommContext::next_tag() {
  constexpr unsigned tag_range = 32768;  // MPI guarantees MPI_TAG_UB >= 32767
  return static_cast<int>(sequence_++ % tag_range);
}

}  // namespace agx
