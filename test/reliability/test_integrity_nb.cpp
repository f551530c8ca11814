// AGX_INTEGRITY on the nonblocking node paths (shared_memory, hierarchical): the
// end-to-end check is a phase of test(), not a collective inside start()
// (docs/reliability.md, "Nonblocking and persistent calls").
//
//   test_integrity_nb            (AGX_INTEGRITY=1, no AGX_TEST_FLIP)
//     rank 0's start() returns while the other ranks sleep 1 s before theirs: it takes
//     less than 0.5 s (a start that ran the check, a collective, would wait for them);
//     the data is exact; requests and plan starts alike. Then start(A); a blocking call
//     on rank 0 before its wait(A), after it on the others: no rank hangs.
//   test_integrity_nb --flip     (AGX_INTEGRITY=1, AGX_TEST_FLIP=<R>:0)
//     start() raises nothing; the flipped rank R gets the error from wait() (requests)
//     or from a test() polling loop (plan starts), MPI_ERR_OTHER with exactly the message
//     the blocking call raises for the same data; the other ranks succeed.

#include <agx/agx.hpp>

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

int rank = 0, n = 0, failed = 0;

void fail(const std::string& what) {
  if (++failed <= 20) std::fprintf(stderr, "FAIL rank %d of %d: %s\n", rank, n, what.c_str());
}

std::vector<int> block(unsigned salt, int r, std::size_t count) {
  std::vector<int> b(count);
  for (std::size_t i = 0; i < count; ++i) b[i] = static_cast<int>(salt * 100000 + 1000 * r + i);
  return b;
}

void check(const std::vector<int>& recv, unsigned salt, std::size_t count, const std::string& what) {
  for (int r = 0; r < n; ++r)
    if (block(salt, r, count) !=
        std::vector<int>(recv.begin() + static_cast<long>(r * count), recv.begin() + static_cast<long>((r + 1) * count)))
      return fail(what + ": block " + std::to_string(r) + " differs");
}

// The others sleep before their start; rank 0's start() must return long before.
void start_returns_first(agx::Algorithm a, bool plan, unsigned salt) {
  const std::string what = std::string(agx::to_string(a)) + (plan ? " plan start" : " start");
  const std::size_t count = 2000;
  const auto send = block(salt, rank, count);
  std::vector<int> recv(count * static_cast<std::size_t>(n), -1);
  agx::Allgather<int> g(MPI_COMM_WORLD, {a});
  agx::Plan p;
  if (plan) p = g.plan(send, recv);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  agx::Request r;
  if (plan) p.start();
  else r = g.start(send, recv);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rank == 0 && took >= 0.5)
    fail(what + ": start() took " + std::to_string(took) + " s while the others slept 1 s");
  if (plan) p.wait();
  else r.wait();
  check(recv, salt, count, what);
}

// start(A); then rank 0 makes a blocking call B before wait(A), the others wait(A)
// first (legal: only the start order is fixed). B's end-to-end check waits for every
// rank, and the others wait in A for rank 0's CRC message: B must advance A meanwhile.
void blocking_between(agx::Algorithm a, unsigned salt) {
  const std::string what = std::string(agx::to_string(a)) + " start, blocking call, wait";
  const std::size_t count = 300;
  const auto sa = block(salt, rank, count), sb = block(salt + 1, rank, count);
  std::vector<int> ra(count * static_cast<std::size_t>(n), -1), rb(ra.size(), -1);
  agx::Allgather<int> g(MPI_COMM_WORLD, {a});
  agx::Request r = g.start(sa, ra);
  if (rank == 0) {
    g(sb, rb);
    r.wait();
  } else {
    r.wait();
    g(sb, rb);
  }
  check(ra, salt, count, what + " (A)");
  check(rb, salt + 1, count, what + " (B)");
}

// The error of one call: its text, or empty.
template <class Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const agx::Error& e) {
    if (e.error_class() != MPI_ERR_OTHER) fail(std::string("class ") + std::to_string(e.error_class()) + ": " + e.what());
    return e.what();
  }
  return {};
}

void flip_found_by_test(agx::Algorithm a, int flip_rank, unsigned salt) {
  const std::string name(agx::to_string(a));
  const std::size_t count = 500;
  const auto send = block(salt, rank, count);
  std::vector<int> recv(count * static_cast<std::size_t>(n), -1);
  agx::Allgather<int> g(MPI_COMM_WORLD, {a});
  const std::string blocking = error_of([&] { g(send, recv); });
  if ((rank == flip_rank) != !blocking.empty())
    fail(name + " blocking: error '" + blocking + "' on rank " + std::to_string(rank));

  // A request: start() raises nothing, wait() raises the blocking call's error.
  std::fill(recv.begin(), recv.end(), -1);
  agx::Request r;
  const std::string at_start = error_of([&] { r = g.start(send, recv); });
  if (!at_start.empty()) fail(name + " start(): raised '" + at_start + "' inside start()");
  const std::string at_wait = error_of([&] { r.wait(); });
  if (at_wait != blocking)
    fail(name + " wait(): '" + at_wait + "', the blocking call raised '" + blocking + "'");

  // A plan, polled with test(): the same error, from test().
  std::fill(recv.begin(), recv.end(), -1);
  agx::Plan p = g.plan(send, recv);
  const std::string plan_start = error_of([&] { p.start(); });
  if (!plan_start.empty()) fail(name + " plan start(): raised '" + plan_start + "' inside start()");
  const std::string at_test = error_of([&] {
    while (!p.test()) sched_yield();
  });
  if (at_test != blocking)
    fail(name + " plan test(): '" + at_test + "', the blocking call raised '" + blocking + "'");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const bool flip = argc > 1 && std::string(argv[1]) == "--flip";
  int flip_rank = -1, flip_round = 0;
  if (const char* f = std::getenv("AGX_TEST_FLIP"))
    if (std::sscanf(f, "%d:%d", &flip_rank, &flip_round) != 2) flip_rank = -1;
  if (flip != (flip_rank >= 0)) {
    if (rank == 0) std::fprintf(stderr, "test_integrity_nb: --flip needs AGX_TEST_FLIP=<rank>:0\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  // shared_memory serves one node only (virtual nodes: hierarchical alone).
  std::vector<agx::Algorithm> paths{agx::Algorithm::hierarchical};
  try {
    agx::choose_algorithm(MPI_COMM_WORLD, agx::Layout::uniform(n, 4), {agx::Algorithm::shared_memory});
    paths.insert(paths.begin(), agx::Algorithm::shared_memory);
  } catch (const agx::Error&) {
  }
  unsigned salt = 1;
  try {
    for (agx::Algorithm a : paths) {
      if (flip) {
        flip_found_by_test(a, flip_rank, salt++);
        continue;
      }
      std::vector<int> one(1), all(static_cast<std::size_t>(n));
      agx::Allgather<int>(MPI_COMM_WORLD, {a})(one, all);  // the node state is made
      for (bool plan : {false, true}) start_returns_first(a, plan, salt++);
      blocking_between(a, salt);
      salt += 2;
    }
  } catch (const agx::Error& e) {
    fail(std::string("agx::Error: ") + e.what());
  }
  int total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("test_integrity_nb%s N=%d: %s (%d failures)\n", flip ? " --flip" : "", n,
                             total ? "FAIL" : "ok", total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
