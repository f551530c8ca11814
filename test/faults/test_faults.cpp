// Failure paths of the C++ API, with libfault.so preloaded (fault.cpp): one MPI call
// that agx makes fails on purpose, on every rank at the same call, and then
//   - the call throws agx::Error with the injected error class, naming the MPI call;
//   - no request agx made is left in flight and no datatype unfreed (the fault
//     library counts them);
//   - the same communicator then serves a clean call of the same algorithm, whose
//     result is checked (blocks, gaps between them, guards); after blocking faults the
//     communicator is freed and a new one serves clean calls with the same tags (a
//     message left over from the failed call must not reach them: MPICH gives a freed
//     communicator's context to the next new one).
// Blocking calls: MPI_Irecv, MPI_Isend, MPI_Waitall, MPI_Type_create_hindexed and
// MPI_Type_commit fail, the first or the second time, for every point-to-point
// algorithm. Nonblocking calls: MPI_Irecv and MPI_Isend inside start(), MPI_Testall
// inside the progress that follows. Persistent plans: MPI_Recv_init / MPI_Send_init
// at planning, MPI_Startall at a start, MPI_Testall while it runs; a failed plan
// refuses later starts (MPI_ERR_REQUEST) and a new plan works.
// Every rank runs the same schedule position when the fault hits, which needs
// schedules where every rank makes the same calls in the same rounds: run at 2 or 4
// ranks, with every block non-empty. The layout is the v form, blocks in reverse order
// with gaps, so that multi-block messages need hindexed datatypes.

#include <agx/agx.hpp>

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using arm_fn = void (*)(const char*, long, int);
using void_fn = void (*)();
using long_fn = long (*)();
arm_fn fault_arm;
void_fn fault_disarm;
long_fn fault_injected, fault_live_requests, fault_live_types, fault_persistent_requests;

int rank = 0, nranks = 0;
int failures = 0, checked = 0, not_reached = 0;

void fail(const std::string& what) {
  if (failures++ < 20) std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
}

constexpr std::uint32_t sentinel = 0xA5A5A5A5u;

std::uint32_t value(unsigned salt, int r, std::size_t i) {
  std::uint64_t x = salt * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(r) << 40) ^ i;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<std::uint32_t>(x) | 1u;  // odd: never the sentinel
}

// The v layout: block r has 5 + 3r elements, blocks in reverse rank order, gaps of 2,
// guards of 4 on both ends.
struct Call {
  std::vector<int> counts, displs;
  std::vector<std::uint32_t> send, store;
  unsigned salt = 0;
  explicit Call(unsigned s) : counts(nranks), displs(nranks), salt(s) {
    int at = 0;
    for (int r = nranks - 1; r >= 0; --r) {
      counts[r] = 5 + 3 * r;
      displs[r] = at;
      at += counts[r] + 2;
    }
    store.assign(static_cast<std::size_t>(at + 8), sentinel);
    send.resize(static_cast<std::size_t>(counts[rank]));
    for (std::size_t i = 0; i < send.size(); ++i) send[i] = value(salt, rank, i);
  }
  std::span<std::uint32_t> recv() { return std::span(store).subspan(4, store.size() - 8); }
  bool correct() const {
    std::vector<std::uint32_t> want(store.size(), sentinel);
    for (int r = 0; r < nranks; ++r)
      for (int i = 0; i < counts[r]; ++i)
        want[static_cast<std::size_t>(4 + displs[r] + i)] = value(salt, r, static_cast<std::size_t>(i));
    return want == store;
  }
};

unsigned next_salt = 1;

// Arms the fault, runs `call` (which must throw), and checks what is left behind
// (a live plan keeps its datatypes: `plan_alive`). Returns false when the fault was
// not reached (the schedule makes fewer such calls).
bool expect_fault(const std::string& what, const char* mpi_call, long at, int error_class,
                  const std::function<void()>& call, bool plan_alive = false) {
  const long injected = fault_injected();
  MPI_Barrier(MPI_COMM_WORLD);
  fault_arm(mpi_call, at, error_class);
  bool threw = false;
  try {
    call();
  } catch (const agx::Error& e) {
    threw = true;
    if (e.error_class() != error_class)
      fail(what + ": error class " + std::to_string(e.error_class()) + ", injected " +
           std::to_string(error_class) + " (" + e.what() + ")");
    else if (std::strstr(e.what(), mpi_call) == nullptr)
      fail(what + ": the message does not name " + mpi_call + ": " + e.what());
  }
  fault_disarm();
  const int fired = fault_injected() > injected ? 1 : 0;
  int fired_min = 0, fired_max = 0;
  MPI_Allreduce(&fired, &fired_min, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&fired, &fired_max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (fired_min != fired_max) fail(what + ": the fault hit some ranks only");
  if (fired && !threw) fail(what + ": the injected failure did not throw");
  if (!fired && threw) fail(what + ": threw without a fault");
  if (fault_live_requests() != 0)
    fail(what + ": " + std::to_string(fault_live_requests()) + " requests left in flight");
  if (!plan_alive && fault_live_types() != 0)
    fail(what + ": " + std::to_string(fault_live_types()) + " datatypes left unfreed");
  if (fired) ++checked;
  else ++not_reached;
  return fired != 0;
}

agx::Options options(agx::AlgorithmChoice a) { return {a.id, true, a.radix}; }

void clean_call(const std::string& what, agx::AlgorithmChoice a, MPI_Comm comm = MPI_COMM_WORLD) {
  Call c(next_salt++);
  try {
    agx::Allgather<std::uint32_t>(comm, options(a)).v(c.send, c.recv(), c.counts, c.displs);
    if (!c.correct()) fail(what + ": the clean call after the fault gathered wrong data");
  } catch (const agx::Error& e) {
    fail(what + ": the clean call after the fault threw: " + e.what());
  }
  if (fault_live_requests() != 0 || fault_live_types() != 0)
    fail(what + ": the clean call left requests or types behind");
}

struct Fault {
  const char* call;
  long at;
  int error_class;
};

void blocking(agx::AlgorithmChoice a) {
  const Fault faults[] = {{"MPI_Irecv", 1, MPI_ERR_OTHER},      {"MPI_Irecv", 2, MPI_ERR_INTERN},
                          {"MPI_Isend", 1, MPI_ERR_OTHER},      {"MPI_Isend", 2, MPI_ERR_INTERN},
                          {"MPI_Waitall", 1, MPI_ERR_OTHER},    {"MPI_Waitall", 2, MPI_ERR_INTERN},
                          {"MPI_Type_create_hindexed", 1, MPI_ERR_INTERN},
                          {"MPI_Type_commit", 1, MPI_ERR_TYPE}, {"MPI_Type_commit", 2, MPI_ERR_OTHER}};
  for (const Fault& f : faults) {
    const std::string what = "blocking " + agx::to_string(a) + " " + f.call + " #" +
                             std::to_string(f.at);
    // The fault hits the first call on a new communicator (tag 0 of its context); after
    // a clean call there, it is freed and the next new communicator's calls use tags 0
    // and 1 again: a message left over from the failed call must reach none of them.
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    Call c(next_salt++);
    const bool fired = expect_fault(what, f.call, f.at, f.error_class, [&] {
      agx::Allgather<std::uint32_t>(comm, options(a)).v(c.send, c.recv(), c.counts, c.displs);
    });
    if (!fired && !c.correct()) fail(what + ": no fault, but wrong data");
    clean_call(what, a, comm);
    MPI_Comm_free(&comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    clean_call(what + " (next communicator)", a, comm);
    clean_call(what + " (next communicator)", a, comm);
    MPI_Comm_free(&comm);
  }
}

void nonblocking(agx::AlgorithmChoice a) {
  const Fault faults[] = {{"MPI_Irecv", 1, MPI_ERR_OTHER},
                          {"MPI_Isend", 1, MPI_ERR_INTERN},
                          {"MPI_Testall", 1, MPI_ERR_OTHER}};
  for (const Fault& f : faults) {
    const std::string what = "nonblocking " + agx::to_string(a) + " " + f.call + " #" +
                             std::to_string(f.at);
    Call c(next_salt++);
    expect_fault(what, f.call, f.at, f.error_class, [&] {
      agx::Request r = agx::Allgather<std::uint32_t>(MPI_COMM_WORLD, options(a))
                           .start_v(c.send, c.recv(), c.counts, c.displs);
      r.wait();
    });
    clean_call(what, a);
  }
}

void persistent(agx::AlgorithmChoice a) {
  const std::string name = agx::to_string(a);
  agx::Allgather<std::uint32_t> g(MPI_COMM_WORLD, options(a));
  // At planning: the plan is not made, and nothing of it is left.
  for (const Fault& f : {Fault{"MPI_Recv_init", 1, MPI_ERR_OTHER}, Fault{"MPI_Send_init", 2, MPI_ERR_INTERN}}) {
    Call c(next_salt++);
    const std::string what = "plan " + name + " " + f.call;
    expect_fault(what, f.call, f.at, f.error_class,
                 [&] { agx::Plan p = g.plan_v(c.send, c.recv(), c.counts, c.displs); });
    if (fault_persistent_requests() != 0) fail(what + ": a plan that failed to build left requests");
  }
  // At a start, and while a start runs: the plan is failed from then on.
  for (const Fault& f : {Fault{"MPI_Startall", 1, MPI_ERR_OTHER}, Fault{"MPI_Testall", 1, MPI_ERR_INTERN}}) {
    const std::string what = "plan " + name + " " + f.call;
    Call c(next_salt++);
    {
      agx::Plan p = g.plan_v(c.send, c.recv(), c.counts, c.displs);
      p.start();  // one clean start first
      p.wait();
      if (!c.correct()) fail(what + ": the clean start before the fault gathered wrong data");
      expect_fault(
          what, f.call, f.at, f.error_class,
          [&] {
            p.start();
            p.wait();
          },
          true);
      try {
        p.start();
        fail(what + ": a failed plan started again");
      } catch (const agx::Error& e) {
        if (e.error_class() != MPI_ERR_REQUEST) fail(what + ": restart: wrong error class");
      }
    }  // the destructor frees the failed plan's requests
    if (fault_live_requests() != 0 || fault_persistent_requests() != 0 || fault_live_types() != 0)
      fail(what + ": a destroyed failed plan left requests or datatypes");
    Call again(next_salt++);
    agx::Plan p = g.plan_v(again.send, again.recv(), again.counts, again.displs);
    p.start();
    p.wait();
    if (!again.correct()) fail(what + ": a new plan after the failure gathered wrong data");
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  fault_arm = reinterpret_cast<arm_fn>(dlsym(RTLD_DEFAULT, "fault_arm"));
  fault_disarm = reinterpret_cast<void_fn>(dlsym(RTLD_DEFAULT, "fault_disarm"));
  fault_injected = reinterpret_cast<long_fn>(dlsym(RTLD_DEFAULT, "fault_injected"));
  fault_live_requests = reinterpret_cast<long_fn>(dlsym(RTLD_DEFAULT, "fault_live_requests"));
  fault_live_types = reinterpret_cast<long_fn>(dlsym(RTLD_DEFAULT, "fault_live_types"));
  fault_persistent_requests =
      reinterpret_cast<long_fn>(dlsym(RTLD_DEFAULT, "fault_persistent_requests"));
  if (fault_arm == nullptr || fault_disarm == nullptr || fault_injected == nullptr ||
      fault_live_requests == nullptr || fault_live_types == nullptr ||
      fault_persistent_requests == nullptr) {
    if (rank == 0) std::fprintf(stderr, "test_faults: libfault.so is not preloaded\n");
    MPI_Finalize();
    return 1;
  }
  if (nranks != 2 && nranks != 4) {
    if (rank == 0) std::printf("SKIP: test_faults needs 2 or 4 ranks (aligned schedules)\n");
    MPI_Finalize();
    return 77;
  }
  for (const agx::AlgorithmChoice& a : agx::algorithm_variants()) {  // the point-to-point ones
    if (!agx::algorithm_info(a.id).point_to_point) continue;
    blocking(a);
    nonblocking(a);
    persistent(a);
  }
  int totals[3] = {failures, checked, not_reached}, sums[3] = {};
  MPI_Reduce(totals, sums, 3, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("test_faults N=%d: %d faults surfaced and cleaned up, %d not reached by the "
                "schedule, %d failures\n",
                nranks, sums[1] / nranks, sums[2] / nranks, sums[0]);
  MPI_Finalize();
  return sums[0] == 0 ? 0 : 1;
}
