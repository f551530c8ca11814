// A repeated blocking call of one shape allocates nothing in agx (issue 15): every
// global operator new of the process is counted while calls 2..K of a shape run, and the
// count must be 0 on every rank. The first call of a shape may allocate (it compiles the
// schedule's message descriptors, lib/core/descriptors.hpp); the repeats reuse them.
//
// Built twice:
//   test_no_alloc        the C++ API (agx::Allgather<std::uint8_t>), every point-to-point
//                        algorithm forced, out of place and in place, two sizes, and two
//                        shapes alternating (both stay cached)
//   pmpi_no_alloc        plain MPI_Allgather, and MPI_Iallgather + MPI_Wait, no agx
//                        header or library: run with LD_PRELOAD=libagx_pmpi.so (pmpi
//                        suite), AGX_ALGO naming the algorithm (the interposer's
//                        repeated-call path; its pooled nonblocking requests), one shape
//                        at a time (MPI's own allocations, the generalized request's
//                        among them, are malloc's: not counted)
// With AGX_DESCRIPTOR_CACHE=0 the repeats plan their messages anew and allocate: run so
// with --expect-allocations, which passes only when every shape allocated (and the data
// is right), the check is shown to fail without the cache.
// The node paths (shared_memory, hierarchical) blocking, nonblocking (start + wait, also
// two requests of one shape in flight together) and planned, in the counting run; at 4
// ranks on 2 virtual nodes (AGX_VIRTUAL_NODE_SIZE=2) hierarchical crosses nodes.
// NO_ALLOC_TRACE=1 prints where each counted allocation came from (a backtrace).

// In both runs a plan (agx::Plan, every point-to-point algorithm, out of place and in
// place) is started again and again: its starts allocate nothing, cache or not (its
// requests and datatypes are made once, lib/core/persistent.hpp).
// Exit 0: no allocation in any repeat (with --expect-allocations: some in every one but
// the plans').

#include <execinfo.h>
#include <mpi.h>
#include <unistd.h>

#ifndef AGX_NO_ALLOC_PMPI
#include <agx/agx.hpp>
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

// NO_ALLOC_TRACE=1: where each counted allocation of rank 0 came from (no allocation itself:
// backtrace_symbols_fd writes straight to stderr).
bool trace = false;
thread_local bool tracing = false;

void trace_allocation(std::size_t n) {
  if (!trace || tracing) return;
  tracing = true;
  void* frames[24];
  const int depth = backtrace(frames, 24);
  char line[64];
  const int len = std::snprintf(line, sizeof line, "allocation of %zu B:\n", n);
  if (len > 0) (void)!write(2, line, static_cast<std::size_t>(len));
  backtrace_symbols_fd(frames, depth, 2);
  tracing = false;
}

void* counted(std::size_t n, std::size_t align = 0) {
  if (counting.load(std::memory_order_relaxed)) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    trace_allocation(n);
  }
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n);
  return p;
}

}  // namespace

// The replacements below pair operator new with free(): GCC, inlining both into one
// function, takes that for a mismatch (a false positive: new here is malloc).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = counted(n, static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

constexpr int repeats = 20;
int rank = 0, nranks = 1;
int failures = 0;
int checks = 0;
int plan_failures = 0;  // counted apart: plans allocate nothing with the cache off too
bool wrong_data = false;

std::uint8_t pattern(int r, std::size_t j, int salt) {
  return static_cast<std::uint8_t>(r * 31 + static_cast<int>(j) * 7 + salt);
}

/// One call shape: its send and receive buffers and how to run it.
struct Shape {
  const char* name;
  std::size_t m;  // bytes per block
  bool in_place;
  std::vector<std::uint8_t> send, recv;
  Shape(const char* n, std::size_t bytes, bool inplace)
      : name(n), m(bytes), in_place(inplace), send(bytes), recv(bytes * static_cast<std::size_t>(nranks)) {}
  void fill(int salt) {  // no allocation
    std::uint8_t* own = in_place ? recv.data() + m * static_cast<std::size_t>(rank) : send.data();
    for (std::size_t j = 0; j < m; ++j) own[j] = pattern(rank, j, salt);
  }
  bool correct(int salt) const {
    for (int r = 0; r < nranks; ++r)
      for (std::size_t j = 0; j < m; ++j)
        if (recv[static_cast<std::size_t>(r) * m + j] != pattern(r, j, salt)) return false;
    return true;
  }
};

/// Runs `call(shape)` once, then `repeats` more times counting allocations (shapes in
/// turn: several shapes alternate), and checks the data of the last repeat.
template <class Call>
void check(const char* what, std::vector<Shape*> shapes, Call call) {
  int salt = 1;
  for (Shape* s : shapes) {
    s->fill(salt);
    if (!call(*s)) return;  // not served at this rank count (the same on every rank)
  }
  allocations = 0;
  counting = true;
  for (int i = 0; i < repeats; ++i) {
    ++salt;
    for (Shape* s : shapes) {
      s->fill(salt);
      call(*s);
    }
  }
  counting = false;
  long count = allocations.load();
  bool ok = true;
  for (Shape* s : shapes) ok = ok && s->correct(salt);
  long most = 0;
  int all_ok = 0, local_ok = ok ? 1 : 0;
  MPI_Allreduce(&count, &most, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&local_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  const bool failed = most != 0 || !all_ok;
  failures += failed ? 1 : 0;
  ++checks;
  wrong_data = wrong_data || !all_ok;
  if (rank == 0)
    std::printf("%s %s: %ld allocations in %d repeats (most on one rank)%s\n",
                failed ? "FAIL" : "ok  ", what, most, repeats * static_cast<int>(shapes.size()),
                all_ok ? "" : ", WRONG DATA");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const bool expect_allocations = argc > 1 && std::string_view(argv[1]) == "--expect-allocations";
  const char* trace_setting = std::getenv("NO_ALLOC_TRACE");
  trace = rank == 0 && trace_setting != nullptr && std::string_view(trace_setting) == "1";
  Shape small("8 B", 8, false), small_in("8 B in place", 8, true);
  Shape odd("5001 B", 5001, false), odd_in("5001 B in place", 5001, true);
  char what[160];
#ifdef AGX_NO_ALLOC_PMPI
  const auto mpi = [](Shape& s) {
    const int m = static_cast<int>(s.m);
    const int rc = s.in_place ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s.recv.data(), m,
                                              MPI_BYTE, MPI_COMM_WORLD)
                              : MPI_Allgather(s.send.data(), m, MPI_BYTE, s.recv.data(), m,
                                              MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS;
  };
  const char* algo = std::getenv("AGX_ALGO");
  for (Shape* s : {&small, &small_in, &odd, &odd_in}) {
    std::snprintf(what, sizeof what, "MPI_Allgather %s, AGX_ALGO=%s, %d ranks", s->name,
                  algo != nullptr ? algo : "", nranks);
    check(what, {s}, mpi);
  }
  const auto mpi_nonblocking = [](Shape& s) {
    const int m = static_cast<int>(s.m);
    MPI_Request r = MPI_REQUEST_NULL;
    const int rc = s.in_place ? MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s.recv.data(), m,
                                               MPI_BYTE, MPI_COMM_WORLD, &r)
                              : MPI_Iallgather(s.send.data(), m, MPI_BYTE, s.recv.data(), m,
                                               MPI_BYTE, MPI_COMM_WORLD, &r);
    return rc == MPI_SUCCESS && MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS;
  };
  for (Shape* s : {&small, &small_in, &odd, &odd_in}) {
    std::snprintf(what, sizeof what, "MPI_Iallgather + MPI_Wait %s, AGX_ALGO=%s, %d ranks", s->name,
                  algo != nullptr ? algo : "", nranks);
    check(what, {s}, mpi_nonblocking);
  }
  // (No alternating shapes here: the interposer's repeated-call path remembers one shape
  // per thread, lib/pmpi/fast_call.hpp; another shape takes its full path, which allocates.)
#else
  struct Forced {
    const char* name;
    agx::Options options;
  };
  const Forced forced[] = {
      {"direct", {agx::Algorithm::direct}},
      {"ring", {agx::Algorithm::ring}},
      {"neighbor_exchange", {agx::Algorithm::neighbor_exchange}},
      {"recursive_doubling", {agx::Algorithm::recursive_doubling}},
      {"bruck", {agx::Algorithm::bruck}},
      {"bruck:k=3", {agx::Algorithm::bruck, true, 3}},
      {"distance_halving", {agx::Algorithm::distance_halving}},
      {"locality_bruck", {agx::Algorithm::locality_bruck}},
  };
  for (const Forced& f : forced) {
    const agx::Allgather<std::uint8_t> g(MPI_COMM_WORLD, f.options);
    const auto run = [&g](Shape& s) {
      try {
        if (s.in_place) g.in_place(s.recv);
        else g(std::span<const std::uint8_t>(s.send), s.recv);
        return true;
      } catch (const agx::Error&) {  // this algorithm does not serve this rank count
        return false;
      }
    };
    for (Shape* s : {&small, &small_in, &odd, &odd_in}) {
      std::snprintf(what, sizeof what, "%s %s, %d ranks", f.name, s->name, nranks);
      check(what, {s}, run);
    }
    std::snprintf(what, sizeof what, "%s 8 B and 5001 B in place alternating, %d ranks", f.name,
                  nranks);
    check(what, {&small_in, &odd_in}, run);
    for (Shape* s : {&small, &odd_in}) {
      agx::Plan p;
      try {
        p = s->in_place ? g.plan_in_place(s->recv)
                        : g.plan(std::span<const std::uint8_t>(s->send), s->recv);
      } catch (const agx::Error&) {  // not served at this rank count
        continue;
      }
      const auto start = [&p](Shape&) {
        p.start();
        p.wait();
        return true;
      };
      std::snprintf(what, sizeof what, "%s plan %s, %d ranks", f.name, s->name, nranks);
      const int failures_before = failures, checks_before = checks;
      check(what, {s}, start);
      plan_failures += failures - failures_before;
      failures = failures_before;
      checks = checks_before;
    }
  }
  // The node paths' blocking calls: the planner's schedule on the round engine with one
  // execution per schedule, rebound per call (blocks in the flag lines at 8 B, staged
  // through the segment at 5001 B). They use no descriptor cache, so they allocate nothing
  // with it off too: run only in the counting mode. Their nonblocking calls and plans
  // below take their call objects from the schedule's pool (lib/hier/node_call.cpp).
  if (!expect_allocations)
    for (const agx::Algorithm a : {agx::Algorithm::shared_memory, agx::Algorithm::hierarchical}) {
      const agx::Allgather<std::uint8_t> g(MPI_COMM_WORLD, {a});
      const auto run = [&g](Shape& s) {
        try {
          if (s.in_place) g.in_place(s.recv);
          else g(std::span<const std::uint8_t>(s.send), s.recv);
          return true;
        } catch (const agx::Error&) {  // shared_memory across several nodes
          return false;
        }
      };
      for (Shape* s : {&small, &small_in, &odd, &odd_in}) {
        std::snprintf(what, sizeof what, "%s %s, %d ranks", std::string(agx::to_string(a)).c_str(), s->name, nranks);
        check(what, {s}, run);
      }
      std::snprintf(what, sizeof what, "%s 8 B and 5001 B alternating, %d ranks", std::string(agx::to_string(a)).c_str(),
                    nranks);
      check(what, {&small, &odd}, run);
    }
  // The node paths' nonblocking calls (start + wait) and plans (start + wait): a repeated
  // start of one shape takes the operation, the node call, its execution and its
  // segment's tables from the pools the first start filled. Two requests of one shape
  // in flight together take two pooled calls (both must complete with the right data).
  if (!expect_allocations)
    for (const agx::Algorithm a : {agx::Algorithm::shared_memory, agx::Algorithm::hierarchical}) {
      const std::string name(agx::to_string(a));
      const agx::Allgather<std::uint8_t> g(MPI_COMM_WORLD, {a});
      const auto start = [&g](Shape& s) {
        return s.in_place ? g.start_in_place(s.recv)
                          : g.start(std::span<const std::uint8_t>(s.send), s.recv);
      };
      const auto start_wait = [&start](Shape& s) {
        try {
          agx::Request r = start(s);
          r.wait();
          return true;
        } catch (const agx::Error&) {  // shared_memory across several nodes
          return false;
        }
      };
      for (Shape* s : {&small, &small_in, &odd, &odd_in}) {
        std::snprintf(what, sizeof what, "%s start+wait %s, %d ranks", name.c_str(), s->name, nranks);
        check(what, {s}, start_wait);
      }
      std::snprintf(what, sizeof what, "%s start+wait 8 B and 5001 B alternating, %d ranks",
                    name.c_str(), nranks);
      check(what, {&small, &odd}, start_wait);
      // Two of one shape in flight: the first shape's call starts a request and returns,
      // the second's starts another and waits for both, the later one first.
      Shape first("5001 B", 5001, false), second("5001 B", 5001, false);
      agx::Request pending;
      const auto overlapping = [&](Shape& s) {
        try {
          if (&s == &first) {
            pending = start(s);
            return true;
          }
          agx::Request r = start(s);
          r.wait();
          pending.wait();
          return true;
        } catch (const agx::Error&) {
          return false;
        }
      };
      std::snprintf(what, sizeof what, "%s two 5001 B starts in flight together, %d ranks",
                    name.c_str(), nranks);
      check(what, {&first, &second}, overlapping);
      pending = agx::Request();
      for (Shape* s : {&small, &odd_in}) {
        agx::Plan p;
        try {
          p = s->in_place ? g.plan_in_place(s->recv)
                          : g.plan(std::span<const std::uint8_t>(s->send), s->recv);
        } catch (const agx::Error&) {  // shared_memory across several nodes
          continue;
        }
        const auto plan_start = [&p](Shape&) {
          try {
            p.start();
            p.wait();
            return true;
          } catch (const agx::Error&) {  // shared_memory across several nodes
            return false;
          }
        };
        std::snprintf(what, sizeof what, "%s plan %s, %d ranks", name.c_str(), s->name, nranks);
        check(what, {s}, plan_start);
      }
    }
  // A pending request keeps the compiled schedule it runs: shapes enough to push it out of
  // the cache (AGX_DESCRIPTOR_CACHE entries), run while it is in flight, leave its data
  // right (AddressSanitizer sees any use after free); then on a duplicate freed while
  // the request is pending.
  if (!expect_allocations) {
    const agx::Allgather<std::uint8_t> g(MPI_COMM_WORLD, {agx::Algorithm::bruck});
    for (const bool free_comm : {false, true}) {
      MPI_Comm dup = MPI_COMM_NULL;
      MPI_Comm_dup(MPI_COMM_WORLD, &dup);
      const agx::Allgather<std::uint8_t> on_dup(dup, {agx::Algorithm::bruck});
      Shape pending("pending", 1000, false);
      pending.fill(77);
      agx::Request r = (free_comm ? on_dup : g).start(std::span<const std::uint8_t>(pending.send),
                                                      pending.recv);
      if (free_comm) MPI_Comm_free(&dup);
      for (std::size_t m = 1; m <= 40; ++m) {
        Shape other("other", m, false);
        other.fill(static_cast<int>(m));
        g(std::span<const std::uint8_t>(other.send), other.recv);
        if (!other.correct(static_cast<int>(m))) wrong_data = true;
      }
      r.wait();
      int ok = pending.correct(77) && !wrong_data ? 1 : 0, all = 0;
      MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      ++checks;
      failures += all ? 0 : 1;
      if (rank == 0)
        std::printf("%s a request pending while 40 other shapes ran%s, %d ranks\n",
                    all ? "ok  " : "FAIL", free_comm ? " (its communicator freed)" : "", nranks);
      if (!free_comm) MPI_Comm_free(&dup);
    }
  }
#endif
  MPI_Finalize();
  if (expect_allocations) {
    if (rank == 0)
      std::printf("%d of %d shapes allocated (expected: all)%s\n", failures, checks,
                  wrong_data ? ", WRONG DATA" : "");
    return failures == checks && checks > 0 && !wrong_data && plan_failures == 0 ? 0 : 1;
  }
  return failures == 0 && plan_failures == 0 ? 0 : 1;
}
