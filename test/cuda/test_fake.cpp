// The device path against fake_cuda (test/cuda/fake_cuda, preloaded): real MPI ranks,
// a CUDA runtime that reports a device and keeps "device" memory in shared host memory.
// One case per run (--case=NAME), each for one defect of issue 19 (docs/gpu.md):
//   order     host buffers on a GPU node: start(A); blocking B; wait(A) on rank 0 while
//             the others start(A); wait(A); B -- must not hang; no CUDA context made
//   displs    IPC with per-rank displacements and a receive buffer inside its allocation
//   aware     the CUDA-aware path: the own block is in place before MPI reads it
//   cache     IPC with buffers freed and reallocated every call: mappings bounded, all
//             closed at MPI_Finalize
//   error     a CUDA failure on rank 1 (FAKE_CUDA_FAIL): agx::Error there, and the other
//             ranks return with an error instead of hanging (AGX_TIMEOUT, reported by
//             the round engine: algorithm, path, round)
//   settings  AGX_CUDA_PATH differs between ranks: MPI_ERR_ARG on every rank
//   device    contexts only on the device each rank set (cudaSetDevice), none on others
//   choice    a large single-node call on device buffers, automatic path: IPC (node
//             algorithms priced from their schedules, not as free)
//   progress  rank 0 starts, then MPI_Ssend to rank 1, which receives before it starts
//             (a start must not wait for the other ranks); and rank 0 tests its start
//             while rank 1, started, sits in MPI_Recv (test() must not wait for it
//             either); host buffers, then device buffers on the forced path
//   pinned    large staging calls with AGX_CUDA_STAGING_BYTES: pinned memory bounded
//   report    AGX_CUDA_PATH=aware: a node algorithm stages and is reported so (path
//             and returned algorithm); ring runs aware
//   integrity staging under AGX_INTEGRITY with AGX_TEST_FLIP (issue 15: staging runs on
//             the round engine): the flipped block is found on rank 1, which fails
//             naming it; ranks that return have the right data (rank 2: host buffers)
// A watchdog ends a hung case after 60 s (TEST_FAKE_WATCHDOG seconds; exit 3).

#include <agx/agx.hpp>

#include "cuda/device_path.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace {

struct FakeCudaCounters {
  long contexts[16];
  long ipc_open, ipc_opened, ipc_closed;
  long pinned_bytes, pinned_peak;
};

FakeCudaCounters counters() {
  using Fn = FakeCudaCounters (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "fake_cuda_counters"));
  if (fn == nullptr) {
    std::fprintf(stderr, "test_fake: fake_cuda is not preloaded\n");
    std::exit(2);
  }
  return fn();
}

int rank_ = 0, size_ = 1, failures = 0;

void fail(const std::string& what) {
  ++failures;
  std::fprintf(stderr, "rank %d: FAIL %s\n", rank_, what.c_str());
}

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "rank %d: %s: %s\n", rank_, what, cudaGetErrorString(e));
    std::exit(2);
  }
}

unsigned char byte_of(int r, std::size_t i) {
  return static_cast<unsigned char>((r * 37 + i * 7 + 1) & 0xff);
}

/// Checks `recv` (device) holds block r of `block` bytes at byte offset displs[r].
void check(const void* recv, std::size_t total, std::size_t block, const std::vector<int>& displs,
           const std::string& what) {
  std::vector<unsigned char> got(total);
  ok(cudaMemcpy(got.data(), recv, total, cudaMemcpyDefault), "cudaMemcpy");
  for (int r = 0; r < size_; ++r)
    for (std::size_t i = 0; i < block; ++i)
      if (got[static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]) + i] != byte_of(r, i)) {
        fail(what + ": block " + std::to_string(r) + " byte " + std::to_string(i));
        return;
      }
}

void fill_send(void* send, std::size_t block) {
  std::vector<unsigned char> s(block);
  for (std::size_t i = 0; i < block; ++i) s[i] = byte_of(rank_, i);
  ok(cudaMemcpy(send, s.data(), block, cudaMemcpyDefault), "cudaMemcpy");
}

void case_order() {
  MPI_Comm a, b;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_dup(MPI_COMM_WORLD, &b);
  const std::size_t n = 1000;
  std::vector<int> sa(n, rank_), ra(n * static_cast<std::size_t>(size_));
  std::vector<int> sb(n, rank_ + 100), rb(n * static_cast<std::size_t>(size_));
  agx::Allgather<int> ga(a), gb(b);
  // A communicator's first call makes agx's private duplicate (MPI_Comm_split, blocking):
  // both are made first, by every rank in the same order.
  ga(sa, ra);
  gb(sb, rb);
  for (int round = 0; round < 3; ++round) {
    agx::Request r = ga.start(sa, ra);
    if (rank_ == 0) {
      gb(sb, rb);
      r.wait();
    } else {
      r.wait();
      gb(sb, rb);
    }
    for (int p = 0; p < size_; ++p)
      if (ra[static_cast<std::size_t>(p) * n] != p || rb[static_cast<std::size_t>(p) * n] != p + 100)
        fail("host data of rank " + std::to_string(p));
  }
  const FakeCudaCounters c = counters();
  long contexts = 0;
  for (long k : c.contexts) contexts += k;
  if (contexts != 0) fail("host-only calls made " + std::to_string(contexts) + " CUDA context calls");
  MPI_Comm_free(&a);
  MPI_Comm_free(&b);
}

void case_displs() {
  // Rank r lays blocks out in its own order with its own gaps, 256 bytes into its
  // allocation: legal in MPI, and the IPC path must read each peer's own block.
  const std::size_t block = 3000, gap = 100 * static_cast<std::size_t>(rank_ + 1);
  std::vector<int> counts(static_cast<std::size_t>(size_), static_cast<int>(block));
  std::vector<int> displs(static_cast<std::size_t>(size_), 0);
  for (int k = 0; k < size_; ++k) {
    const int r = size_ - 1 - ((k + rank_) % size_);
    displs[static_cast<std::size_t>(r)] = static_cast<int>(static_cast<std::size_t>(k) * (block + gap));
  }
  const std::size_t total = static_cast<std::size_t>(size_) * (block + gap);
  void *alloc = nullptr, *send = nullptr;
  ok(cudaMalloc(&alloc, total + 256), "cudaMalloc");
  ok(cudaMalloc(&send, block), "cudaMalloc");
  auto* recv = static_cast<unsigned char*>(alloc) + 256;
  fill_send(send, block);
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  g.v(std::span<const unsigned char>(static_cast<const unsigned char*>(send), block),
      std::span<unsigned char>(recv, total), counts, displs);
  check(recv, total, block, displs, "ipc v form");
  const auto path = agx::cuda::last_path();
  if (!path || *path != agx::cuda::Path::ipc) fail("the call did not take the IPC path");
  ok(cudaFree(send), "cudaFree");
  ok(cudaFree(alloc), "cudaFree");
}

std::vector<int> plain_displs(std::size_t block) {
  std::vector<int> d;
  for (int r = 0; r < size_; ++r) d.push_back(r * static_cast<int>(block));
  return d;
}

void case_aware() {
  const std::size_t block = 5000, total = block * static_cast<std::size_t>(size_);
  void *send = nullptr, *recv = nullptr;
  ok(cudaMalloc(&send, block), "cudaMalloc");
  ok(cudaMalloc(&recv, total), "cudaMalloc");
  ok(cudaMemset(recv, 0x5a, total), "cudaMemset");
  fill_send(send, block);
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  g(std::span<const unsigned char>(static_cast<const unsigned char*>(send), block),
    std::span<unsigned char>(static_cast<unsigned char*>(recv), total));
  check(recv, total, block, plain_displs(block), "aware");
  const auto path = agx::cuda::last_path();
  if (!path || *path != agx::cuda::Path::aware) fail("the call did not take the aware path");
  ok(cudaFree(send), "cudaFree");
  ok(cudaFree(recv), "cudaFree");
}

void case_cache() {
  const std::size_t block = 512, total = block * static_cast<std::size_t>(size_);
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  for (int i = 0; i < 40; ++i) {  // a caching allocator's churn: new buffers every call
    void *send = nullptr, *recv = nullptr, *pad = nullptr;
    ok(cudaMalloc(&pad, 64 * static_cast<std::size_t>(i % 3)), "cudaMalloc");
    ok(cudaMalloc(&send, block), "cudaMalloc");
    ok(cudaMalloc(&recv, total), "cudaMalloc");
    fill_send(send, block);
    g(std::span<const unsigned char>(static_cast<const unsigned char*>(send), block),
      std::span<unsigned char>(static_cast<unsigned char*>(recv), total));
    check(recv, total, block, plain_displs(block), "ipc call " + std::to_string(i));
    ok(cudaFree(send), "cudaFree");
    ok(cudaFree(recv), "cudaFree");
    ok(cudaFree(pad), "cudaFree");
  }
  const FakeCudaCounters c = counters();
  if (c.ipc_open > 16) fail(std::to_string(c.ipc_open) + " IPC mappings open (bound 16)");
}

void case_error() {
  const std::size_t block = 4096, total = block * static_cast<std::size_t>(size_);
  void *send = nullptr, *recv = nullptr;
  ok(cudaMalloc(&send, block), "cudaMalloc");
  ok(cudaMalloc(&recv, total), "cudaMalloc");
  fill_send(send, block);
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  bool threw = false;
  std::string what;
  try {
    g(std::span<const unsigned char>(static_cast<const unsigned char*>(send), block),
      std::span<unsigned char>(static_cast<unsigned char*>(recv), total));
  } catch (const agx::Error& e) {
    threw = true;
    what = e.what();
    std::fprintf(stderr, "rank %d: agx::Error %d: %s\n", rank_, e.error_class(), e.what());
  }
  // Rank 1's copy failed: every rank must have returned (the watchdog says otherwise)
  // with an error (the others' ring rounds wait for rank 1: AGX_TIMEOUT reports them,
  // in the round engine's words: algorithm, path, round, the peer still awaited).
  if (!threw) fail(rank_ == 1 ? "the CUDA failure was not reported" : "the call completed");
  else if (rank_ != 1 && what.find("algorithm ring (staging, device buffers), round ") == std::string::npos)
    fail("the stall was not reported by the round engine: " + what);
  MPI_Barrier(MPI_COMM_WORLD);  // not agx's communicator: usable after the failure
}

void case_settings() {
  const std::size_t n = 64;
  std::vector<int> s(n, rank_), r(n * static_cast<std::size_t>(size_));
  agx::Allgather<int> g(MPI_COMM_WORLD);
  try {
    g(s, r);
    fail("differing AGX_CUDA_PATH was accepted");
  } catch (const agx::Error& e) {
    if (e.error_class() != MPI_ERR_ARG) fail(std::string("wrong error class: ") + e.what());
    else if (rank_ == 0) std::printf("rank 0: %s\n", e.what());
  }
}

void case_device() {
  int devices = 0;
  ok(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  const int mine = rank_ % devices;
  ok(cudaSetDevice(mine), "cudaSetDevice");
  const std::size_t block = 2048, total = block * static_cast<std::size_t>(size_);
  void *send = nullptr, *recv = nullptr;
  ok(cudaMalloc(&send, block), "cudaMalloc");
  ok(cudaMalloc(&recv, total), "cudaMalloc");
  fill_send(send, block);
  std::vector<unsigned char> hs(block, 1), hr(total);
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  g(hs, hr);  // host buffers too
  g(std::span<const unsigned char>(static_cast<const unsigned char*>(send), block),
    std::span<unsigned char>(static_cast<unsigned char*>(recv), total));
  // Nonblocking, 20 times: under AGX_PROGRESS_THREAD=1 the progress thread (which starts
  // on device 0) advances some of them, and must do so on this rank's device.
  for (int i = 0; i < 20; ++i) {
    agx::Request req = g.start(std::span<const unsigned char>(static_cast<const unsigned char*>(send), block),
                               std::span<unsigned char>(static_cast<unsigned char*>(recv), total));
    req.wait();
  }
  check(recv, total, block, plain_displs(block), "staging on device " + std::to_string(mine));
  const FakeCudaCounters c = counters();
  for (int d = 0; d < devices && d < 16; ++d)
    if (d != mine && c.contexts[d] != 0)
      fail("CUDA work on device " + std::to_string(d) + " (this rank set device " +
           std::to_string(mine) + ")");
  ok(cudaFree(send), "cudaFree");
  ok(cudaFree(recv), "cudaFree");
}

void case_choice() {
  const std::size_t block = std::size_t{8} << 20, total = block * static_cast<std::size_t>(size_);
  void *send = nullptr, *recv = nullptr;
  ok(cudaMalloc(&send, block), "cudaMalloc");
  ok(cudaMalloc(&recv, total), "cudaMalloc");
  fill_send(send, block);
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  const agx::Algorithm a =
      g(std::span<const unsigned char>(static_cast<const unsigned char*>(send), block),
        std::span<unsigned char>(static_cast<unsigned char*>(recv), total));
  check(recv, total, block, plain_displs(block), "auto path");
  const auto path = agx::cuda::last_path();
  if (!path || *path != agx::cuda::Path::ipc)
    fail(std::string("8 MiB per rank on one node took ") +
         (path ? std::string(agx::cuda::to_string(*path)) : std::string("no device path")) +
         " with " + std::string(agx::to_string(a)) + ", not ipc");
  else if (a != agx::Algorithm::shared_memory)  // its IPC schedule: each rank read every peer's block
    fail("the IPC call returned " + std::string(agx::to_string(a)) + ", not shared_memory");
  ok(cudaFree(send), "cudaFree");
  ok(cudaFree(recv), "cudaFree");
}

/// One start that must not wait for the peer: `later` ranks start only after rank 0
/// has started (rank 0 MPI_Ssends to them after its start); with `tests`, rank 0 also
/// calls test() 200 times first, while rank 1 has started and sits in a plain MPI
/// receive (so the agreement settles and the device path begins inside rank 0's
/// test(), which must not wait for rank 1's part either).
template <class Start>
void one_start(Start start, bool tests) {
  if (!tests && rank_ == 1) MPI_Recv(nullptr, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  agx::Request q = start();
  if (tests && rank_ == 1) MPI_Recv(nullptr, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (tests && rank_ == 0)
    for (int i = 0; i < 200; ++i) {
      (void)q.test();
      usleep(1000);
    }
  if (rank_ == 0) MPI_Ssend(nullptr, 0, MPI_BYTE, 1, 99, MPI_COMM_WORLD);
  q.wait();
}

void case_progress() {
  // Host buffers, then device buffers (the path AGX_CUDA_PATH forces): each in both
  // orders above; every byte checked.
  const std::size_t n = 256, block = 70001;
  std::vector<int> s(n, rank_), r(n * static_cast<std::size_t>(size_));
  agx::Allgather<int> g(MPI_COMM_WORLD, {agx::Algorithm::ring});
  g(s, r);  // the communicator's first call (blocking by design) is made first
  for (bool tests : {false, true}) {
    std::fill(r.begin(), r.end(), -1);
    one_start([&] { return g.start(s, r); }, tests);
    for (int p = 0; p < size_; ++p)
      if (r[static_cast<std::size_t>(p) * n] != p) fail("host data of rank " + std::to_string(p));
  }
  const std::size_t total = block * static_cast<std::size_t>(size_);
  void *send = nullptr, *recv = nullptr;
  ok(cudaMalloc(&send, block), "cudaMalloc");
  ok(cudaMalloc(&recv, total), "cudaMalloc");
  fill_send(send, block);
  agx::Allgather<unsigned char> d(MPI_COMM_WORLD);
  std::vector<int> displs(static_cast<std::size_t>(size_));
  for (int p = 0; p < size_; ++p) displs[static_cast<std::size_t>(p)] = p * static_cast<int>(block);
  const std::span<const unsigned char> ds(static_cast<const unsigned char*>(send), block);
  const std::span<unsigned char> dr(static_cast<unsigned char*>(recv), total);
  d(ds, dr);  // the first automatic choice sets up the node topology (collective, blocking)
  check(recv, total, block, displs, "device blocking call");
  for (bool tests : {false, true}) {
    ok(cudaMemset(recv, 0, total), "cudaMemset");
    one_start([&] { return d.start(ds, dr); }, tests);
    check(recv, total, block, displs, tests ? "device start, tested early" : "device start");
  }
  const auto path = agx::cuda::last_path();
  if (rank_ == 0)
    std::printf("progress: device path %s\n",
                path ? std::string(agx::cuda::to_string(*path)).c_str() : "none");
  ok(cudaFree(send), "cudaFree");
  ok(cudaFree(recv), "cudaFree");
}

void case_pinned() {
  // 16 MiB per rank (48 MiB received at 3 ranks) through staging with
  // AGX_CUDA_STAGING_BYTES=4 MiB: every call's data right, pinned memory at most
  // 4 MiB at any time (the mirror was the whole receive extent, rounded up: 64 MiB).
  // Blocking and nonblocking, out of place and in place, ring and a forced
  // shared_memory (run as ring in slices), and rank 2 with host buffers (it must cut
  // its messages the same way).
  const std::size_t block = std::size_t{16} << 20, total = block * static_cast<std::size_t>(size_);
  const bool host = rank_ == 2;
  std::vector<unsigned char> hs, hr;
  void *send = nullptr, *recv = nullptr;
  if (host) {
    hs.resize(block);
    hr.resize(total);
    send = hs.data();
    recv = hr.data();
  } else {
    ok(cudaMalloc(&send, block), "cudaMalloc");
    ok(cudaMalloc(&recv, total), "cudaMalloc");
  }
  fill_send(send, block);
  std::vector<int> displs(static_cast<std::size_t>(size_));
  for (int p = 0; p < size_; ++p) displs[static_cast<std::size_t>(p)] = p * static_cast<int>(block);
  const std::span<const unsigned char> ds(static_cast<const unsigned char*>(send), block);
  const std::span<unsigned char> dr(static_cast<unsigned char*>(recv), total);
  for (agx::Algorithm a : {agx::Algorithm::ring, agx::Algorithm::shared_memory}) {
    agx::Allgather<unsigned char> g(MPI_COMM_WORLD, {a});
    ok(cudaMemset(recv, 0, total), "cudaMemset");
    const agx::Algorithm ran = g(ds, dr);
    check(recv, total, block, displs, std::string("blocking ") + std::string(agx::to_string(a)));
    if (ran != agx::Algorithm::ring)  // what ran, not what was asked for
      fail(std::string(agx::to_string(a)) + " in slices returned " + std::string(agx::to_string(ran)));
    ok(cudaMemset(recv, 0, total), "cudaMemset");
    g.start(ds, dr).wait();
    check(recv, total, block, displs, std::string("start ") + std::string(agx::to_string(a)));
    ok(cudaMemset(recv, 0, total), "cudaMemset");
    fill_send(static_cast<unsigned char*>(recv) + displs[static_cast<std::size_t>(rank_)], block);
    g.in_place(dr);
    check(recv, total, block, displs, std::string("in place ") + std::string(agx::to_string(a)));
  }
  const FakeCudaCounters c = counters();
  const long bound = 4l << 20;
  if (rank_ == 0) std::printf("pinned: peak %ld bytes, %ld held at the end\n", c.pinned_peak, c.pinned_bytes);
  if (c.pinned_peak > bound)
    fail("pinned memory peaked at " + std::to_string(c.pinned_peak) + " bytes, over the " +
         std::to_string(bound) + "-byte bound");
  if (!host) {
    ok(cudaFree(send), "cudaFree");
    ok(cudaFree(recv), "cudaFree");
  }
}

void case_integrity() {
  // Several pieces and own-block chunks per block (AGX_CUDA_CHUNK_BYTES in the test's env).
  const std::size_t block = 100000, total = block * static_cast<std::size_t>(size_);
  const bool host = rank_ == 2;
  std::vector<unsigned char> hs(block), hr(total);
  void *send = hs.data(), *recv = hr.data();
  if (!host) {
    ok(cudaMalloc(&send, block), "cudaMalloc");
    ok(cudaMalloc(&recv, total), "cudaMalloc");
  }
  fill_send(send, block);
  std::vector<int> displs(static_cast<std::size_t>(size_));
  for (int p = 0; p < size_; ++p) displs[static_cast<std::size_t>(p)] = p * static_cast<int>(block);
  agx::Allgather<unsigned char> g(MPI_COMM_WORLD);
  std::string error;
  try {
    g(std::span<const unsigned char>(static_cast<const unsigned char*>(send), block),
      std::span<unsigned char>(static_cast<unsigned char*>(recv), total));
  } catch (const agx::Error& e) {
    error = e.what();
    std::fprintf(stderr, "rank %d: agx::Error %d: %s\n", rank_, e.error_class(), e.what());
    if (e.error_class() != MPI_ERR_OTHER) fail("wrong error class: " + error);
  }
  if (rank_ == 1 && error.find("corrupted") == std::string::npos)
    fail("the block flipped on rank 1 was not found (" + (error.empty() ? "no error" : error) + ")");
  if (error.empty()) check(recv, total, block, displs, "integrity");
  if (!host) {
    ok(cudaFree(send), "cudaFree");
    ok(cudaFree(recv), "cudaFree");
  }
}

void case_report() {
  // AGX_CUDA_PATH=aware with a CUDA-aware MPI: a node algorithm cannot run there (it
  // stages), and what is reported must say so; ring does run aware.
  const std::size_t block = 4096, total = block * static_cast<std::size_t>(size_);
  void *send = nullptr, *recv = nullptr;
  ok(cudaMalloc(&send, block), "cudaMalloc");
  ok(cudaMalloc(&recv, total), "cudaMalloc");
  fill_send(send, block);
  std::vector<int> displs(static_cast<std::size_t>(size_));
  for (int p = 0; p < size_; ++p) displs[static_cast<std::size_t>(p)] = p * static_cast<int>(block);
  const std::span<const unsigned char> ds(static_cast<const unsigned char*>(send), block);
  const std::span<unsigned char> dr(static_cast<unsigned char*>(recv), total);
  struct Expect {
    agx::Algorithm asked;
    agx::cuda::Path path;
  };
  for (const Expect e : {Expect{agx::Algorithm::shared_memory, agx::cuda::Path::staging},
                         Expect{agx::Algorithm::ring, agx::cuda::Path::aware}}) {
    agx::Allgather<unsigned char> g(MPI_COMM_WORLD, {e.asked});
    ok(cudaMemset(recv, 0, total), "cudaMemset");
    const agx::Algorithm returned = g(ds, dr);
    check(recv, total, block, displs, std::string(agx::to_string(e.asked)));
    const auto run = agx::cuda::last_run();
    const auto path = agx::cuda::last_path();
    const std::string asked(agx::to_string(e.asked));
    if (!run || !path || run->path != e.path || *path != e.path)
      fail(asked + " reported path " +
           (path ? std::string(agx::cuda::to_string(*path)) : std::string("none")) + ", ran " +
           std::string(agx::cuda::to_string(e.path)));
    if (returned != e.asked || !run || run->algorithm != e.asked)
      fail(asked + " returned " + std::string(agx::to_string(returned)));
  }
  ok(cudaFree(send), "cudaFree");
  ok(cudaFree(recv), "cudaFree");
}

}  // namespace

int main(int argc, char** argv) {
  std::string which;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--case=", 7) == 0) which = argv[i] + 7;
  std::signal(SIGALRM, [](int) {
    const char msg[] = "test_fake: hung for 60 s\n";
    (void)!write(2, msg, sizeof msg - 1);
    std::_Exit(3);
  });
  const char* watchdog = std::getenv("TEST_FAKE_WATCHDOG");
  alarm(watchdog != nullptr ? static_cast<unsigned>(std::atoi(watchdog)) : 60u);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (which == "settings" && rank_ == 1) setenv("AGX_CUDA_PATH", "ipc", 1);  // read at first call
  if (which == "order") case_order();
  else if (which == "displs") case_displs();
  else if (which == "aware") case_aware();
  else if (which == "cache") case_cache();
  else if (which == "error") case_error();
  else if (which == "settings") case_settings();
  else if (which == "device") case_device();
  else if (which == "choice") case_choice();
  else if (which == "progress") case_progress();
  else if (which == "pinned") case_pinned();
  else if (which == "report") case_report();
  else if (which == "integrity") case_integrity();
  else {
    std::fprintf(stderr, "test_fake: unknown --case=%s\n", which.c_str());
    return 2;
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank_ == 0) std::printf("fake_cuda %s: %d ranks, %d failures\n", which.c_str(), size_, all);
  MPI_Finalize();
  if (which == "cache") {  // every IPC mapping closed by MPI_Finalize
    const FakeCudaCounters c = counters();
    if (c.ipc_open != 0) {
      std::fprintf(stderr, "rank %d: FAIL %ld IPC mappings open after MPI_Finalize\n", rank_, c.ipc_open);
      all = 1;
    }
  }
  return all == 0 ? 0 : 1;
}
