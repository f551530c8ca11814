// A nonblocking call on a brand-new communicator never waits for the other ranks inside
// start() (docs/nonblocking.md, "The first call on a new communicator"). Each case runs on
// a fresh MPI_Comm_dup of the world, on which agx has made no call yet:
//
//   rank 0: r = start(...); MPI_Ssend(token -> rank 1); r.wait();
//   rank 1: MPI_Recv(token <- rank 0); r = start(...); r.wait();
//
// legal MPI (only the start order of collectives is fixed), which deadlocks when rank 0's
// start() runs the communicator's collective set-up. Guard: alarm(); a rank still inside
// the case when it rings prints which case hung and ends the job.
// Cases: ring and auto, out of place and in place, a v layout with gaps (in place too);
// then on the same communicators a blocking call, after which a start is agx's again; a
// start, a blocking call (the set-up), then the wait; start(), MPI_Comm_free, wait();
// the option errors on a fresh communicator; a fused group's start and an encoded start.

#include <agx/agx.hpp>

#include "nb_check.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace nb_test;

namespace {

constexpr unsigned deadline_s = 30;
constexpr int token_tag = 4343;
int rank_ = 0, n_ = 1;
char current[128] = "start";
const char* only = nullptr;  // argv[1]: run only the first-call cases whose name has it

void on_alarm(int) {
  char line[256];
  const int len = std::snprintf(line, sizeof line,
                                "rank %d: FAIL %s: no progress within %u s (a start() waited "
                                "for the other ranks)\n", rank_, current, deadline_s);
  if (len > 0) (void)!write(2, line, static_cast<std::size_t>(len));
  _exit(3);
}

void arm(const std::string& what) {
  std::snprintf(current, sizeof current, "%s", what.c_str());
  alarm(deadline_s);
}

MPI_Comm fresh() {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  return c;
}

// Rank 0 after its start, rank 1 before its own: the token on the call's communicator.
void token_before_peer(MPI_Comm c, bool after_start) {
  if (n_ < 2) return;
  if (after_start && rank_ == 0) MPI_Ssend(nullptr, 0, MPI_BYTE, 1, token_tag, c);
  if (!after_start && rank_ == 1) MPI_Recv(nullptr, 0, MPI_BYTE, 0, token_tag, c, MPI_STATUS_IGNORE);
}

void check_library(const agx::Request& r, const std::string& what) {
  if (r.algorithm() != agx::Algorithm::automatic)
    fail(what + ": ran " + std::string(agx::to_string(r.algorithm())) +
         ", not the MPI library's all-gather");
}

void uniform(MPI_Comm c, agx::Options o, bool in_place, unsigned salt, const std::string& what) {
  arm(what);
  const std::size_t count = 1000;
  const auto send = block(salt, rank_, count);
  Guarded recv(count * static_cast<std::size_t>(n_));
  if (in_place)
    std::memcpy(recv.data() + static_cast<std::size_t>(rank_) * count, send.data(), count * 4);
  agx::Allgather<std::uint32_t> g(c, o);
  token_before_peer(c, false);
  agx::Request r = in_place ? g.start_in_place(std::span(recv.data(), recv.size()))
                            : g.start(send, std::span(recv.data(), recv.size()));
  token_before_peer(c, true);
  check_library(r, what);
  r.wait();
  check_uniform(recv, salt, n_, count, what);
  alarm(0);
}

void varying(MPI_Comm c, agx::Options o, bool in_place, unsigned salt, const std::string& what) {
  arm(what);
  std::vector<int> counts, displs;
  int at = 3;  // gaps before, between (reversed order) and after the blocks
  for (int r = n_ - 1; r >= 0; --r) {
    counts.insert(counts.begin(), 100 * r + (r % 2 == 0 ? 0 : 37));
    displs.insert(displs.begin(), at);
    at += counts.front() + 5;
  }
  const auto send = block(salt, rank_, static_cast<std::size_t>(counts[static_cast<std::size_t>(rank_)]));
  Guarded recv(static_cast<std::size_t>(at + 2));
  if (in_place && !send.empty())
    std::memcpy(recv.data() + displs[static_cast<std::size_t>(rank_)], send.data(), send.size() * 4);
  agx::Allgather<std::uint32_t> g(c, o);
  token_before_peer(c, false);
  agx::Request r = in_place ? g.start_v_in_place(std::span(recv.data(), recv.size()), counts, displs)
                            : g.start_v(send, std::span(recv.data(), recv.size()), counts, displs);
  token_before_peer(c, true);
  check_library(r, what);
  r.wait();
  check_v(recv, salt, counts, displs, what);  // gaps untouched (in place too)
  alarm(0);
}

void first_calls() {
  const agx::Options ring{agx::Algorithm::ring};
  const agx::Options automatic{};
  unsigned salt = 10;
  for (const auto& [o, name] : {std::pair{ring, "ring"}, std::pair{automatic, "auto"}}) {
    for (bool in_place : {false, true}) {
      const std::string how = std::string(name) + (in_place ? " in place" : "");
      salt += 3;
      if (only == nullptr || (how + ": first call").find(only) != std::string::npos) {
        MPI_Comm c = fresh();
        uniform(c, o, in_place, salt, how + ": first call");
        uniform(c, o, in_place, salt + 1, how + ": second call");  // still no set-up
        MPI_Comm_free(&c);
      }
      if (only == nullptr || (how + " v: first call").find(only) != std::string::npos) {
        MPI_Comm c = fresh();
        varying(c, o, in_place, salt + 2, how + " v: first call");
        MPI_Comm_free(&c);
      }
    }
  }
}

// A fused group's start and an encoded start on a fresh communicator wait for nobody
// either: each member, and the encoded call (plain then), run as the MPI library's own.
void group_and_encoded() {
  if (only != nullptr) return;
  {
    arm("fused group of three: first call");
    MPI_Comm c = fresh();
    const std::size_t counts[3] = {10, 1000, 3};
    std::vector<std::vector<std::uint32_t>> sends;
    std::vector<Guarded> recvs;
    recvs.reserve(3);
    agx::Group g(c);
    for (unsigned k = 0; k < 3; ++k) {
      sends.push_back(block(60 + k, rank_, counts[k]));
      recvs.emplace_back(counts[k] * static_cast<std::size_t>(n_));
      g.add(std::span<const std::uint32_t>(sends[k]), std::span(recvs[k].data(), recvs[k].size()));
    }
    token_before_peer(c, false);
    agx::FusedRequest r = g.start();
    token_before_peer(c, true);
    r.wait();
    for (unsigned k = 0; k < 3; ++k)
      check_uniform(recvs[k], 60 + k, n_, counts[k], "fused group member " + std::to_string(k));
    MPI_Comm_free(&c);
    alarm(0);
  }
  {
    arm("encoded (lz4): first call");
    MPI_Comm c = fresh();
    const std::size_t count = 40000;  // 160 KB: above the compression threshold
    const auto send = block(70, rank_, count);
    Guarded recv(count * static_cast<std::size_t>(n_));
    agx::EncodeOptions e;
    e.lossless = agx::Lossless::lz4;
    e.min_bytes = 0;
    token_before_peer(c, false);
    agx::EncodedRequest r = agx::start_encoded_allgather(
        c, std::span<const std::uint32_t>(send), std::span(recv.data(), recv.size()), e);
    token_before_peer(c, true);
    r.wait();
    check_uniform(recv, 70, n_, count, "encoded (lz4) first call");
    if (r.result().encoded) fail("encoded (lz4) first call: encoded on a communicator agx had not set up");
    MPI_Comm_free(&c);
    alarm(0);
  }
}

// After a blocking call the communicator is agx's: its starts run agx's algorithms.
void after_blocking() {
  arm("after a blocking call");
  MPI_Comm c = fresh();
  const std::size_t count = 64;
  const auto send = block(40, rank_, count);
  Guarded recv(count * static_cast<std::size_t>(n_));
  agx::Allgather<std::uint32_t> g(c, {agx::Algorithm::ring});
  g(send, std::span(recv.data(), recv.size()));
  check_uniform(recv, 40, n_, count, "blocking call");
  Guarded recv2(count * static_cast<std::size_t>(n_));
  const auto send2 = block(41, rank_, count);
  agx::Request r = g.start(send2, std::span(recv2.data(), recv2.size()));
  if (n_ > 1 && r.algorithm() != agx::Algorithm::ring)
    fail("after a blocking call: ran " + std::string(agx::to_string(r.algorithm())) + ", not ring");
  r.wait();
  check_uniform(recv2, 41, n_, count, "after a blocking call");
  MPI_Comm_free(&c);

  // start() on a fresh communicator, a blocking call (which sets it up), then wait().
  arm("start, blocking call, wait");
  c = fresh();
  agx::Allgather<std::uint32_t> h(c);
  Guarded a(count * static_cast<std::size_t>(n_)), b(count * static_cast<std::size_t>(n_));
  const auto sa = block(42, rank_, count), sb = block(43, rank_, count);
  agx::Request ra = h.start(sa, std::span(a.data(), a.size()));
  h(sb, std::span(b.data(), b.size()));
  ra.wait();
  check_uniform(a, 42, n_, count, "start before the first blocking call");
  check_uniform(b, 43, n_, count, "first blocking call with a start pending");

  // start(), MPI_Comm_free, wait(): MPI lets the pending call outlive the free.
  arm("start, MPI_Comm_free, wait");
  MPI_Comm d = fresh();
  Guarded e(count * static_cast<std::size_t>(n_));
  const auto se = block(44, rank_, count);
  agx::Request re = agx::Allgather<std::uint32_t>(d).start(se, std::span(e.data(), e.size()));
  MPI_Comm_free(&d);
  re.wait();
  check_uniform(e, 44, n_, count, "first start, then MPI_Comm_free");
  MPI_Comm_free(&c);
  alarm(0);
}

// Bad input on a fresh communicator: the classes of any call, before anything moves.
void errors() {
  arm("errors");
  MPI_Comm c = fresh();
  std::vector<std::uint32_t> one(1), all(static_cast<std::size_t>(n_));
  auto expect = [&](agx::Options o, int error_class, const std::string& what) {
    try {
      agx::Request r = agx::Allgather<std::uint32_t>(c, o).start(one, all);
      fail(what + ": no agx::Error");
    } catch (const agx::Error& e) {
      if (e.error_class() != error_class) fail(what + ": class " + std::to_string(e.error_class()));
    }
  };
  expect({agx::Algorithm::automatic, true, 4}, MPI_ERR_ARG, "a radix without its algorithm");
  expect({agx::Algorithm::bruck, true, 1}, MPI_ERR_ARG, "bruck radix 1");
  try {
    const std::vector<std::size_t> bytes(static_cast<std::size_t>(n_ + 1), 4), offsets(bytes.size(), 0);
    agx::Request r = agx::start_allgather_bytes(c, {one.data(), all.data(), false},
                                                agx::Layout::varying(bytes, offsets));
    fail("layout of N+1 blocks: no agx::Error");
  } catch (const agx::Error& e) {
    if (e.error_class() != MPI_ERR_ARG) fail("layout of N+1 blocks: class " + std::to_string(e.error_class()));
  }
  MPI_Comm_free(&c);
  alarm(0);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &n_);
  signal(SIGALRM, on_alarm);
  if (argc > 1) only = argv[1];
  try {
    first_calls();
    group_and_encoded();
    if (only == nullptr) {
      after_blocking();
      errors();
    }
  } catch (const agx::Error& e) {
    fail(std::string("agx::Error: ") + e.what());
  }
  const int rc = finish("test_nb_first");
  MPI_Finalize();
  return rc;
}
