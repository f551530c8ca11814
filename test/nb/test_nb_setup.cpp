// The node set-up of nonblocking and persistent calls never waits inside start()
// (docs/nonblocking.md, "Node paths"; docs/hierarchy.md, "Set-up"). Each case runs on a
// fresh communicator whose node state is not made yet:
// - token: rank 0 starts a forced shared_memory / hierarchical call, then sends a token
//   to every other rank, which receives it before it starts the call. A start() that
//   waits for its peers (a node communicator split, the segment's collectives, the
//   probe's barrier) never sends it: the others give up after `deadline` seconds and
//   abort the job with a message naming the case;
// - rank 0 then stays out of MPI for a while, and polls test() between pieces of other
//   work, while the others wait();
// - growth: the same token order with a call larger than the node's segment;
// - a plan's first start, the same way;
// - auto: the communicator's first auto call runs point-to-point (the blocking calls'
//   rule), the second the node path when the selector's choice is one, token order too;
// - a communicator set up by choose_algorithm only: its first start, token order too.

#include <agx/agx.hpp>

#include "nb_check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using namespace nb_test;

namespace {

constexpr double deadline = 20;  // seconds a rank waits for rank 0's token
constexpr int token_tag = 4242;

int rank_ = 0, n_ = 1;

// A fresh communicator whose agx state exists (a point-to-point call made it: the
// communicator's own set-up is collective) but whose node state does not.
MPI_Comm fresh() {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  std::vector<int> one{rank_}, all(static_cast<std::size_t>(n_));
  agx::Allgather<int>(c, {agx::Algorithm::ring}).operator()(std::span<const int>(one), std::span<int>(all));
  return c;
}

// Other work of rank 0 between two test() calls (no MPI).
double work(int round) {
  double x = round;
  for (int i = 0; i < 20000; ++i) x = std::sin(x) + 1.0;
  return x;
}

// Rank 0 after its start(): the tokens, a while outside MPI, then test() with work.
void lead(agx::Request& r, const std::string& what) {
  std::vector<MPI_Request> tokens;
  for (int p = 1; p < n_; ++p) {
    tokens.push_back(MPI_REQUEST_NULL);
    MPI_Issend(nullptr, 0, MPI_BYTE, p, token_tag, MPI_COMM_WORLD, &tokens.back());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // not in MPI at all
  double sink = 0;
  int polls = 0;
  while (!r.test()) sink += work(++polls);
  if (sink < 0) std::printf("%f\n", sink);  // keep the work
  MPI_Waitall(static_cast<int>(tokens.size()), tokens.data(), MPI_STATUSES_IGNORE);
  (void)what;
}

// The other ranks before their start(): rank 0's token, or the job ends.
void follow(const std::string& what) {
  MPI_Request token = MPI_REQUEST_NULL;
  MPI_Irecv(nullptr, 0, MPI_BYTE, 0, token_tag, MPI_COMM_WORLD, &token);
  const auto t0 = std::chrono::steady_clock::now();
  int flag = 0;
  while (!flag) {
    MPI_Test(&token, &flag, MPI_STATUS_IGNORE);
    if (!flag && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > deadline) {
      std::fprintf(stderr, "rank %d: FAIL %s: rank 0's start() did not return within %.0f s "
                   "(it waits for its peers)\n", rank_, what.c_str(), deadline);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (!flag) std::this_thread::yield();
  }
}

// One call of `count` elements per rank in token order; checks the result.
void token_call(MPI_Comm c, agx::Options options, std::size_t count, unsigned salt,
                const std::string& what, agx::Algorithm expect) {
  const auto send = block(salt, rank_, count);
  Guarded recv(count * static_cast<std::size_t>(n_));
  agx::Allgather<std::uint32_t> g(c, options);
  if (rank_ != 0) follow(what);
  agx::Request r = g.start(send, std::span(recv.data(), recv.size()));
  if (expect != agx::Algorithm::automatic && r.algorithm() != expect)
    fail(what + ": ran " + std::string(agx::to_string(r.algorithm())) + ", not " +
         std::string(agx::to_string(expect)));
  if (rank_ == 0)
    lead(r, what);
  else
    r.wait();
  check_uniform(recv, salt, n_, count, what);
}

void forced(agx::Algorithm a) {
  const std::string name(agx::to_string(a));
  MPI_Comm c = fresh();
  token_call(c, {a}, 1000, 11, name + " first call", a);
  token_call(c, {a}, 1000, 12, name + " second call", a);
  // Larger than the segment the first call made (64 KiB): it grows, from test().
  token_call(c, {a}, 64 * 1024, 13, name + " growth", a);
  MPI_Comm_free(&c);

  // A plan's first start sets the node up the same way.
  c = fresh();
  const std::size_t count = 777;
  const auto send = block(21, rank_, count);
  Guarded recv(count * static_cast<std::size_t>(n_));
  agx::Allgather<std::uint32_t> g(c, {a});
  agx::Plan plan = g.plan(std::span<const std::uint32_t>(send), std::span(recv.data(), recv.size()));
  if (plan.algorithm() != a) fail(name + " plan: not on its node path");
  if (rank_ != 0) follow(name + " plan");
  plan.start();
  if (rank_ == 0) {
    std::vector<MPI_Request> tokens(static_cast<std::size_t>(n_ - 1), MPI_REQUEST_NULL);
    for (int p = 1; p < n_; ++p)
      MPI_Issend(nullptr, 0, MPI_BYTE, p, token_tag, MPI_COMM_WORLD, &tokens[static_cast<std::size_t>(p - 1)]);
    while (!plan.test()) work(1);
    MPI_Waitall(n_ - 1, tokens.data(), MPI_STATUSES_IGNORE);
  } else {
    plan.wait();
  }
  check_uniform(recv, 21, n_, count, name + " plan");
  for (unsigned it = 0; it < 3; ++it) {
    plan.start();
    plan.wait();
    check_uniform(recv, 21, n_, count, name + " plan, start " + std::to_string(it + 2));
  }
  MPI_Comm_free(&c);
}

void automatic() {
  MPI_Comm c = fresh();
  const std::size_t count = 1000;
  const agx::Layout layout = agx::Layout::uniform(n_, count * 4);
  // The first auto call whose choice is a node path runs point-to-point (as blocking).
  const agx::AlgorithmChoice first = agx::choose_algorithm(c, layout);
  token_call(c, {}, count, 31, "auto first call", first.id);
  const agx::AlgorithmChoice second = agx::choose_algorithm(c, layout);
  token_call(c, {}, count, 32, "auto second call", second.id);
  if (rank_ == 0)
    std::printf("auto: first call %s, second %s\n", std::string(agx::to_string(first.id)).c_str(),
                std::string(agx::to_string(second.id)).c_str());
  MPI_Comm_free(&c);
}

// A communicator set up by choose_algorithm alone, no call on it yet: the first start
// agrees on nothing with its peers (the device state, whether any rank sees a GPU, came
// with the set-up exchange; it was an MPI_Iallreduce awaited inside start()).
void set_up_by_choice() {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  (void)agx::choose_algorithm(c, agx::Layout::uniform(n_, 4000));  // collective: the set-up
  token_call(c, {agx::Algorithm::ring}, 1000, 41, "ring, the first call after choose_algorithm",
             agx::Algorithm::ring);
  MPI_Comm_free(&c);
}

bool shared_memory_served() {
  MPI_Comm c = fresh();
  bool served = true;
  try {
    std::vector<int> one(1), all(static_cast<std::size_t>(n_));
    agx::Allgather<int>(c, {agx::Algorithm::shared_memory}).start(one, all).wait();
  } catch (const agx::Error& e) {
    if (e.error_class() != MPI_ERR_ARG) throw;
    served = false;
  }
  MPI_Comm_free(&c);
  return served;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &n_);
  try {
    if (shared_memory_served()) forced(agx::Algorithm::shared_memory);
    forced(agx::Algorithm::hierarchical);
    automatic();
    set_up_by_choice();
  } catch (const agx::Error& e) {
    fail(std::string("agx::Error: ") + e.what());
  }
  const int rc = finish("test_nb_setup");
  MPI_Finalize();
  return rc;
}
