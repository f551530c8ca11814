// The nonblocking suite: agx::Request and agx::Plan at any rank count.
//   test_nb [--thread]     (--thread: MPI_THREAD_MULTIPLE and the progress thread)
// - many overlapping requests on one communicator (each call its own tag), every
//   point-to-point algorithm plus auto, counts 0..5000, completed in a random order
//   that differs per rank, by wait() or by test() polling loops;
// - requests on world, reversed and split communicators in flight together;
// - persistent plans started hundreds of times with changing data, two at once;
// - blocking and nonblocking calls mixed on one communicator, including a rank-
//   dependent place of the wait (legal MPI: only the start order is fixed);
// - destructor of an unfinished request, forced shared_memory, and the errors;
// - calls that outlive their communicator: start(), MPI_Comm_free, wait() (requests and a
//   plan started again after the free), every point-to-point algorithm plus auto;
// - plans whose ranks disagree on a count: the round engine's receive-size check
//   (MPI_ERR_TRUNCATE on every rank that got the short block, directly or forwarded),
//   and the plan still starts afterwards.

#include <agx/agx.hpp>

#include "nb_check.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace nb_test;

namespace {

// auto, every point-to-point algorithm of the registry at each of its radices, and the
// node paths, schedules on the round engine too (shared_memory; hierarchical, which on
// one node plans shared_memory's rounds). shared_memory is left out where the ranks span
// several nodes (served() below).
std::vector<agx::AlgorithmChoice> p2p = [] {
  std::vector<agx::AlgorithmChoice> v{{agx::Algorithm::automatic}};
  for (const auto& a : agx::algorithm_variants())
    if (agx::algorithm_info(a.id).point_to_point) v.push_back(a);
  v.push_back({agx::Algorithm::shared_memory});
  v.push_back({agx::Algorithm::hierarchical});
  return v;
}();

// Whether forced `a` can serve MPI_COMM_WORLD (the same answer on every rank: it depends
// on the placement only).
bool served(agx::AlgorithmChoice a) {
  int one = 1;
  std::vector<int> all(64 * 1024);
  try {
    agx::Allgather<int> g(MPI_COMM_WORLD, {a.id, true, a.radix});
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    all.resize(static_cast<std::size_t>(n));
    g(std::span<const int>(&one, 1), std::span<int>(all));
    return true;
  } catch (const agx::Error& e) {
    if (e.error_class() != MPI_ERR_ARG) throw;
    return false;
  }
}

std::string name(agx::AlgorithmChoice a) { return agx::to_string(a); }

// One in-flight call: its buffers live as long as the request.
struct Pending {
  unsigned salt = 0;
  std::size_t count = 0;
  std::vector<std::uint32_t> send;
  std::unique_ptr<Guarded> recv;
  agx::Request request;
  std::string what;
  MPI_Comm comm = MPI_COMM_NULL;
};

void complete_in_random_order(std::vector<Pending>& calls, std::mt19937& rng) {
  std::vector<std::size_t> order(calls.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t k = 0; k < order.size(); ++k) {
    Pending& p = calls[order[k]];
    if (k % 2 == 0) {
      p.request.wait();
    } else {
      while (!p.request.test()) sched_yield();  // an MPI_Test-style polling loop
    }
    if (p.request.active()) fail(p.what + ": active after completion");
    int n = 0;
    MPI_Comm_size(p.comm, &n);
    check_uniform(*p.recv, p.salt, n, p.count, p.what);
  }
}

Pending start_one(MPI_Comm comm, agx::AlgorithmChoice a, unsigned salt, std::size_t count) {
  int rank = 0, n = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  Pending p;
  p.salt = salt;
  p.count = count;
  p.comm = comm;
  p.send = block(salt, rank, count);
  p.recv = std::make_unique<Guarded>(count * static_cast<std::size_t>(n));
  p.what = "overlap " + name(a) + " count " + std::to_string(count) + " salt " +
           std::to_string(salt);
  agx::Allgather<std::uint32_t> g(comm, {a.id, true, a.radix});
  p.request = g.start(p.send, std::span(p.recv->data(), p.recv->size()));
  return p;
}

void overlapping_same_comm(std::mt19937& rng) {
  const std::size_t counts[] = {0, 1, 7, 1024, 5000};
  std::vector<Pending> calls;
  unsigned salt = 100;
  for (int round = 0; round < 3; ++round) {
    calls.clear();
    for (agx::AlgorithmChoice a : p2p)
      for (std::size_t c : counts) calls.push_back(start_one(MPI_COMM_WORLD, a, salt++, c));
    complete_in_random_order(calls, rng);
  }
}

// A blocking call on `c`, which sets the communicator up: its starts are then agx's own
// (a start on a communicator without one runs as the MPI library's; test_nb_first.cpp).
void set_up(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
  std::vector<int> one(1), all(static_cast<std::size_t>(n));
  agx::Allgather<int>(c, {agx::Algorithm::ring}).operator()(std::span<const int>(one), std::span<int>(all));
}

void overlapping_comms(std::mt19937& rng) {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm reversed, split;
  MPI_Comm_split(MPI_COMM_WORLD, 0, n - rank, &reversed);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &split);
  set_up(reversed);
  set_up(split);
  for (int round = 0; round < 4; ++round) {
    std::vector<Pending> calls;
    unsigned salt = 1000 + static_cast<unsigned>(round) * 10;
    for (MPI_Comm c : {MPI_COMM_WORLD, reversed, split, reversed, MPI_COMM_WORLD}) {
      calls.push_back(start_one(c, p2p[static_cast<std::size_t>(salt) % p2p.size()], salt, 333));
      ++salt;
    }
    complete_in_random_order(calls, rng);
  }
  MPI_Comm_free(&reversed);
  MPI_Comm_free(&split);
}

void persistent(int iterations) {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::size_t count = 37;
  std::vector<std::uint32_t> send(count);
  Guarded recv(count * static_cast<std::size_t>(n));
  // v in place: block r has r % 3 + 1 elements, blocks in reverse order with gaps of 2.
  std::vector<int> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  int at = 1;
  for (int r = n - 1; r >= 0; --r) {
    counts[static_cast<std::size_t>(r)] = r % 3 + 1;
    displs[static_cast<std::size_t>(r)] = at;
    at += r % 3 + 1 + 2;
  }
  Guarded vrecv(static_cast<std::size_t>(at));
  agx::Allgather<std::uint32_t> g(MPI_COMM_WORLD, {agx::Algorithm::ring});
  agx::Allgather<std::uint32_t> gauto(MPI_COMM_WORLD);
  agx::Plan a = g.plan(send, std::span(recv.data(), recv.size()));
  agx::Plan b = gauto.plan_v_in_place(std::span(vrecv.data(), vrecv.size()), counts, displs);
  for (int it = 0; it < iterations; ++it) {
    const auto salt = static_cast<unsigned>(5000 + it);
    const auto own = block(salt, rank, count);
    std::copy(own.begin(), own.end(), send.begin());
    const auto vown = block(salt + 1, rank, static_cast<std::size_t>(counts[static_cast<std::size_t>(rank)]));
    std::copy(vown.begin(), vown.end(), vrecv.data() + displs[static_cast<std::size_t>(rank)]);
    a.start();
    b.start();
    if (it == 0 && a.active()) {
      try {
        a.start();
        fail("plan: second start while running did not throw");
      } catch (const agx::Error& e) {
        if (e.error_class() != MPI_ERR_REQUEST) fail("plan: wrong error class for double start");
      }
    }
    if ((it + rank) % 2 == 0) {
      b.wait();
      while (!a.test()) sched_yield();
    } else {
      a.wait();
      b.wait();
    }
    check_uniform(recv, salt, n, count, "plan ring it " + std::to_string(it));
    check_v(vrecv, salt + 1, counts, displs, "plan v auto it " + std::to_string(it));
  }
  if (a.starts() != static_cast<std::uint64_t>(iterations)) fail("plan: start count");
  if (n > 1 && a.algorithm() != agx::Algorithm::ring) fail("plan: forced ring not used");
}

void mixed_blocking(int iterations) {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  agx::Allgather<std::uint32_t> g(MPI_COMM_WORLD, {agx::Algorithm::bruck});
  {  // the first blocking call on a communicator may set up state collectively (lib/cuda
     // agrees on device use): make it before any request is in flight
    std::vector<std::uint32_t> one(1, 1u), all(static_cast<std::size_t>(n));
    g(one, all);
  }
  for (int it = 0; it < iterations; ++it) {
    const auto salt = static_cast<unsigned>(9000 + 3 * it);
    const std::size_t count = 64 + static_cast<std::size_t>(it);
    auto s1 = block(salt, rank, count), s2 = block(salt + 1, rank, count),
         s3 = block(salt + 2, rank, count);
    const auto total = count * static_cast<std::size_t>(n);
    Guarded r1(total), r2(total), r3(total);
    agx::Request q1 = g.start(s1, std::span(r1.data(), total));
    if (rank % 2 == 0) q1.wait();  // odd ranks wait after the blocking call: still legal
    g(s2, std::span(r2.data(), total));  // blocking, same communicator, between start and wait
    agx::Request q3 = g.start(s3, std::span(r3.data(), total));
    q3.wait();
    q1.wait();
    check_uniform(r1, salt, n, count, "mixed nonblocking 1");
    check_uniform(r2, salt + 1, n, count, "mixed blocking");
    check_uniform(r3, salt + 2, n, count, "mixed nonblocking 3");
  }
}

void destructor_and_forced_hier() {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::size_t count = 4096;
  auto send = block(77, rank, count);
  Guarded recv(count * static_cast<std::size_t>(n));
  {
    agx::Allgather<std::uint32_t> g(MPI_COMM_WORLD, {agx::Algorithm::ring});
    agx::Request r = g.start(send, std::span(recv.data(), recv.size()));
    agx::Request moved = std::move(r);  // the moved-from request is empty and complete
    if (r.active() || !r.test()) fail("moved-from request is not complete");
  }  // the destructor waits
  check_uniform(recv, 77, n, count, "destructor wait");
  Guarded recv2(count * static_cast<std::size_t>(n));
  const bool shm_served = std::any_of(p2p.begin(), p2p.end(), [](const agx::AlgorithmChoice& a) {
    return a.id == agx::Algorithm::shared_memory;
  });
  const agx::Algorithm node_path = shm_served
                                      ? agx::Algorithm::shared_memory
                                      : agx::Algorithm::hierarchical;
  agx::Allgather<std::uint32_t> shm(MPI_COMM_WORLD, {node_path});
  // True progress: rank 0 starts, then sends synchronously to rank 1, which receives
  // before it starts. A start that waited for the other ranks (as the node path once
  // did, and under AGX_INTEGRITY until its end-to-end check became a phase of test())
  // deadlocks here; the reliability suite runs this under AGX_INTEGRITY=1 too.
  if (rank == 1) MPI_Recv(nullptr, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  agx::Request r = shm.start(send, std::span(recv2.data(), recv2.size()));
  if (rank == 0 && n > 1) MPI_Ssend(nullptr, 0, MPI_BYTE, 1, 99, MPI_COMM_WORLD);
  if (r.algorithm() != node_path) fail("forced node path not used");
  r.wait();
  check_uniform(recv2, 77, n, count, "forced shared_memory, nonblocking");
  // The same through a plan, started a few times.
  for (unsigned it = 0; it < 20; ++it) {
    const auto data = block(300 + it, rank, count);
    Guarded recv3(count * static_cast<std::size_t>(n));
    agx::Plan plan = shm.plan(std::span<const std::uint32_t>(data), std::span(recv3.data(), recv3.size()));
    plan.start();
    plan.wait();
    check_uniform(recv3, 300 + it, n, count, "forced shared_memory plan");
  }
}

// MPI lets pending operations outlive MPI_Comm_free (MPI-4.0 6.4.3); so does agx: the
// request keeps the communicator's state alive (lib/core/comm_context.hpp). Under
// AddressSanitizer this was a heap use-after-free.
void outlive_comm_free() {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::size_t count = 3001;
  unsigned salt = 500;
  for (const agx::AlgorithmChoice& a : p2p) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    set_up(c);
    auto send = block(salt, rank, count);
    Guarded recv(count * static_cast<std::size_t>(n));
    agx::Request r;
    {
      agx::Allgather<std::uint32_t> g(c, {a.id, true, a.radix});
      r = g.start(send, std::span(recv.data(), recv.size()));
    }
    MPI_Comm_free(&c);
    r.wait();
    check_uniform(recv, salt, n, count, "request of " + name(a) + " after MPI_Comm_free");
    ++salt;
  }
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  std::vector<std::uint32_t> send(count);
  Guarded recv(count * static_cast<std::size_t>(n));
  agx::Allgather<std::uint32_t> g(c);
  agx::Plan p = g.plan(std::span<const std::uint32_t>(send), std::span(recv.data(), recv.size()));
  MPI_Comm_free(&c);
  for (int it = 0; it < 5; ++it, ++salt) {
    const auto fresh = block(salt, rank, count);
    std::copy(fresh.begin(), fresh.end(), send.begin());  // the plan holds send's address
    p.start();
    p.wait();
    check_uniform(recv, salt, n, count, "plan started after MPI_Comm_free, start " +
                                            std::to_string(it));
  }
}

// Whether AGX_INTEGRITY is on (a disagreement may then show as a wrong CRC first).
bool integrity_on() {
  const char* integrity = std::getenv("AGX_INTEGRITY");
  return integrity != nullptr && std::strcmp(integrity, "1") == 0;
}

// Rank 0 plans its own block one element short, the others expect it whole (a plan_v
// whose counts disagree). Every rank but 0 gets block 0 short, from rank 0 or forwarded
// (the engine forwards a wrong-sized block one byte short): MPI_ERR_TRUNCATE there, or
// MPI_ERR_OTHER where AGX_INTEGRITY finds the block's CRC wrong first. Rank 0 either
// completes with every block right or is told too (a block that travelled with block 0
// may reach it short). Nobody hangs, and the plan is not failed: it starts again.
void plan_disagreeing_counts() {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n < 2) return;
  const bool crc = integrity_on();
  const int c = 6;
  unsigned salt = 700;
  for (const agx::AlgorithmChoice& a : p2p) {
    if (a.id == agx::Algorithm::automatic || !agx::algorithm_info(a.id).point_to_point) continue;
    std::vector<int> counts(static_cast<std::size_t>(n), c), displs(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) displs[static_cast<std::size_t>(r)] = r * c;
    if (rank == 0) counts[0] = c - 1;
    const auto send = block(salt, rank, static_cast<std::size_t>(counts[static_cast<std::size_t>(rank)]));
    Guarded recv(static_cast<std::size_t>(n * c));
    agx::Allgather<std::uint32_t> g(MPI_COMM_WORLD, {a.id, true, a.radix});
    agx::Plan p = g.plan_v(std::span<const std::uint32_t>(send), std::span(recv.data(), recv.size()),
                           counts, displs);
    for (int start = 0; start < 2; ++start) {
      const std::string what = "plan of " + name(a) + " with disagreeing counts, start " +
                               std::to_string(start);
      int cls = MPI_SUCCESS;
      try {
        p.start();
        p.wait();
      } catch (const agx::Error& e) {
        cls = e.error_class();
      }
      const bool told = cls == MPI_ERR_TRUNCATE || (crc && cls == MPI_ERR_OTHER);
      if (cls == MPI_ERR_REQUEST) fail(what + ": the plan was failed (MPI_ERR_REQUEST)");
      else if (rank != 0 && cls == MPI_SUCCESS) fail(what + ": success on a rank that got a short block");
      else if (cls != MPI_SUCCESS && !told) fail(what + ": error class " + std::to_string(cls));
      else if (rank == 0 && cls == MPI_SUCCESS) check_v(recv, salt, counts, displs, what);
    }
    ++salt;
  }
}

// The node path (shared_memory, or hierarchical where the ranks span nodes) with one rank's
// own block one element short where the others expect it whole (rank 0, the last rank and
// rank 1: a leader and, on the multi-node placements, a rank behind one, whose leader
// finds it when it forwards the block and sends it on one byte short): every other rank fails
// with MPI_ERR_TRUNCATE, which its get finds in the owner's size of the block (or under
// AGX_INTEGRITY MPI_ERR_OTHER, where the check finds the skipped block's CRC wrong first),
// blocking and nonblocking, blocks in the flag lines (6 elements) and staged (2048).
// Nobody hangs, and the communicator serves a right call afterwards. Each case on a
// fresh communicator, set up by a right call first (a communicator's first nonblocking
// call may run as the MPI library's, which does not check counts).
void node_disagreeing_counts(agx::Algorithm node_path) {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n < 2) return;
  const bool crc = integrity_on();
  unsigned salt = 900;
  std::vector<int> shorts{0, n - 1, 1};
  shorts.erase(std::unique(shorts.begin(), shorts.end()), shorts.end());
  for (const int short_rank : shorts)
  for (const int c : {6, 2048})
    for (const bool nonblocking : {false, true}) {
      MPI_Comm comm = MPI_COMM_NULL;
      MPI_Comm_dup(MPI_COMM_WORLD, &comm);
      std::vector<int> counts(static_cast<std::size_t>(n), c), displs(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) displs[static_cast<std::size_t>(r)] = r * c;
      if (rank == short_rank) counts[static_cast<std::size_t>(short_rank)] = c - 1;
      const auto send = block(salt, rank, static_cast<std::size_t>(counts[static_cast<std::size_t>(rank)]));
      Guarded recv(static_cast<std::size_t>(n * c));
      agx::Allgather<std::uint32_t> g(comm, {node_path});
      {
        const std::vector<int> right(static_cast<std::size_t>(n), c);
        const auto mine = block(salt, rank, static_cast<std::size_t>(c));
        g.v(std::span<const std::uint32_t>(mine), std::span(recv.data(), recv.size()), right, displs);
      }
      const std::string what = std::string(agx::to_string(node_path)) + " with disagreeing counts (rank " +
                               std::to_string(short_rank) + " short), " + std::to_string(c) + " elements, " +
                               (nonblocking ? "nonblocking" : "blocking");
      int cls = MPI_SUCCESS;
      try {
        if (nonblocking) {
          agx::Request r = g.start_v(std::span<const std::uint32_t>(send),
                                     std::span(recv.data(), recv.size()), counts, displs);
          r.wait();
        } else {
          g.v(std::span<const std::uint32_t>(send), std::span(recv.data(), recv.size()), counts, displs);
        }
      } catch (const agx::Error& e) {
        cls = e.error_class();
      }
      const bool told = cls == MPI_ERR_TRUNCATE || (crc && cls == MPI_ERR_OTHER);
      if (rank != short_rank && !told)
        fail(what + ": error class " + std::to_string(cls) + " on a rank that got a short block");
      else if (rank == short_rank && cls != MPI_SUCCESS && !told)
        fail(what + ": error class " + std::to_string(cls) + " on the short rank");
      // The communicator goes on: a right call after the failed one.
      const std::vector<int> right(static_cast<std::size_t>(n), c);
      const auto again = block(salt + 50, rank, static_cast<std::size_t>(c));
      g.v(std::span<const std::uint32_t>(again), std::span(recv.data(), recv.size()), right, displs);
      check_v(recv, salt + 50, right, displs, what + ", the call after it");
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Comm_free(&comm);
      ++salt;
    }
}

// Counts that give the ranks different copies of one blocking call on one node: rank 0
// sees every block at 100 elements (400 B: the flag lines), the others see rank 1's at 1200
// (4800 B: staged through the segment). Each waits on a word the other never writes; the
// get finds the owner's other path instead: MPI_ERR_TRUNCATE on every rank, no hang, and
// the communicator serves a right call afterwards. (Where the staged side's call would
// have to grow the segment first, the ranks wait in the growth instead, a collective
// step: AGX_TIMEOUT names it. The test grows the segment beforehand.)
void node_path_disagreement() {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n < 2 || !served({agx::Algorithm::shared_memory})) return;
  const bool crc = integrity_on();
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int c = 100, big = 1200;  // 400 B blocks in the flag lines, 4800 B staged
  std::vector<int> counts(static_cast<std::size_t>(n), c), displs(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) displs[static_cast<std::size_t>(r)] = r * big;
  Guarded recv(static_cast<std::size_t>(n * big));
  agx::Allgather<std::uint32_t> g(comm, {agx::Algorithm::shared_memory});
  // A right staged call first, so that the segment holds the staged side's call (a
  // growth is collective: ranks that disagree on it wait there, which AGX_TIMEOUT reports).
  const std::vector<int> bigs(static_cast<std::size_t>(n), big);
  g.v(std::span<const std::uint32_t>(block(950, rank, big)), std::span(recv.data(), recv.size()), bigs, displs);
  if (rank != 0) counts[1] = big;
  const auto send = block(951, rank, static_cast<std::size_t>(counts[static_cast<std::size_t>(rank)]));
  int cls = MPI_SUCCESS;
  try {
    g.v(std::span<const std::uint32_t>(send), std::span(recv.data(), recv.size()), counts, displs);
  } catch (const agx::Error& e) {
    cls = e.error_class();
  }
  if (cls != MPI_ERR_TRUNCATE && !(crc && cls == MPI_ERR_OTHER))
    fail("shared_memory, flag lines on rank 0 against staged elsewhere: error class " +
         std::to_string(cls));
  const std::vector<int> right(static_cast<std::size_t>(n), c);
  Guarded after(static_cast<std::size_t>(n * big));
  g.v(std::span<const std::uint32_t>(block(952, rank, c)), std::span(after.data(), after.size()), right, displs);
  check_v(after, 952, right, displs, "shared_memory, the call after a path disagreement");
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&comm);
}

}  // namespace

int main(int argc, char** argv) {
  const bool thread = argc > 1 && std::strcmp(argv[1], "--thread") == 0;
  // --expect-thread-error: AGX_PROGRESS_THREAD=1 without MPI_THREAD_MULTIPLE must give
  // a clear agx::Error at the first start.
  const bool expect_thread_error = argc > 1 && std::strcmp(argv[1], "--expect-thread-error") == 0;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::mt19937 rng(12345u + static_cast<unsigned>(rank) * 7919u);
  try {
    if (expect_thread_error) {
      std::vector<int> one(1), all(64);
      try {
        agx::Allgather<int>(MPI_COMM_WORLD).start(one, all).wait();
        fail("AGX_PROGRESS_THREAD=1 without MPI_THREAD_MULTIPLE did not throw");
      } catch (const agx::Error& e) {
        if (std::string(e.what()).find("MPI_THREAD_MULTIPLE") == std::string::npos)
          fail("progress thread error does not name MPI_THREAD_MULTIPLE");
      }
      const int rc = nb_test::finish("test_nb --expect-thread-error");
      MPI_Finalize();
      return rc;
    }
    if (thread) {
      agx::set_progress_thread(true);
      if (!agx::progress_thread_running()) fail("progress thread did not start");
    } else if (provided < MPI_THREAD_MULTIPLE) {
      try {
        agx::set_progress_thread(true);
        fail("progress thread started without MPI_THREAD_MULTIPLE");
      } catch (const agx::Error& e) {
        if (std::string(e.what()).find("MPI_THREAD_MULTIPLE") == std::string::npos)
          fail("progress thread error does not name MPI_THREAD_MULTIPLE");
      }
    }
    std::erase_if(p2p, [](const agx::AlgorithmChoice& a) { return !served(a); });
    overlapping_same_comm(rng);
    overlapping_comms(rng);
    persistent(thread ? 100 : 300);
    mixed_blocking(20);
    destructor_and_forced_hier();
    outlive_comm_free();
    plan_disagreeing_counts();
    node_disagreeing_counts(std::any_of(p2p.begin(), p2p.end(),
                                        [](const agx::AlgorithmChoice& a) {
                                          return a.id == agx::Algorithm::shared_memory;
                                        })
                                ? agx::Algorithm::shared_memory
                                : agx::Algorithm::hierarchical);
    node_path_disagreement();
  } catch (const agx::Error& e) {
    fail(std::string("agx::Error: ") + e.what());
  }
  const int rc = nb_test::finish(thread ? "test_nb --thread" : "test_nb");
  MPI_Finalize();
  return rc;
}
