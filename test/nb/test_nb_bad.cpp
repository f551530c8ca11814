// Bad input through every entry point of the C++ API, nonblocking and persistent ones
// first (docs/nonblocking.md, "Bad input"):
// - each bad argument through the blocking call, start*() + wait() and plan*() + start()
//   + wait(): an agx::Error of the right MPI error class whose message says what is wrong,
//   on every rank, with nothing written to the receive buffer or its guards;
// - v blocks that overlap one another (MPI_ERR_ARG naming the two blocks), ascending and
//   in any order, out of place and in place; blocks that only touch, and empty blocks
//   anywhere, still gather;
// - a bad start, plan and v start made by one rank alone on a communicator agx has not
//   set up: it must fail before anything moves (afterwards every rank gathers there; an
//   alarm() ends a run that a stray message or set-up hangs);
// - empty (default-constructed) and moved-from Request and Plan: test() is true, wait()
//   returns, Plan::start() is MPI_ERR_REQUEST;
// - every call of agx::Allgather<T> and the byte-level start and plan before MPI_Init and
//   after MPI_Finalize, and a plan kept past MPI_Finalize started again: MPI_ERR_OTHER
//   naming MPI_Init / MPI_Finalize, no abort; that plan and a request destroyed after
//   MPI_Finalize make no MPI call (Open MPI aborts the job on one).
// Any rank count (the nb suite runs 1, 2 and 3).

#include <agx/agx.hpp>

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace {

int rank = 0, n = 1, failures = 0, passes = 0;

void fail(const std::string& what) {
  if (failures++ < 30) std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
}

constexpr int sentinel = 0x5A5A5A5A;
constexpr std::size_t guard = 16;  // elements on each side

/// A receive region of `count` ints between guards; everything starts as the sentinel.
class Buffer {
 public:
  explicit Buffer(std::size_t count) : store_(count + 2 * guard, sentinel), count_(count) {}
  std::span<int> all() { return {store_.data() + guard, count_}; }
  void reset() { std::fill(store_.begin(), store_.end(), sentinel); }
  /// Nothing written: receive region and guards all sentinel.
  bool untouched() const {
    for (int v : store_)
      if (v != sentinel) return false;
    return true;
  }
  /// Guards intact and, in the region, exactly `want` (sentinel where nothing lands).
  bool holds(const std::vector<int>& want) const {
    for (std::size_t i = 0; i < store_.size(); ++i) {
      const bool inside = i >= guard && i < guard + count_;
      if (store_[i] != (inside ? want[i - guard] : sentinel)) return false;
    }
    return true;
  }

 private:
  std::vector<int> store_;
  std::size_t count_;
};

/// The three ways to make a call: blocking, start*() + wait(), plan*() + start() + wait().
enum class Form { blocking, start, plan };
constexpr Form forms[] = {Form::blocking, Form::start, Form::plan};
const char* name(Form f) { return f == Form::blocking ? "blocking" : f == Form::start ? "start" : "plan"; }

void call(Form f, const agx::Allgather<int>& g, std::span<const int> s, std::span<int> r) {
  if (f == Form::blocking) g(s, r);
  if (f == Form::start) g.start(s, r).wait();
  if (f == Form::plan) {
    agx::Plan p = g.plan(s, r);
    p.start();
    p.wait();
  }
}
void call_in_place(Form f, const agx::Allgather<int>& g, std::span<int> r) {
  if (f == Form::blocking) g.in_place(r);
  if (f == Form::start) g.start_in_place(r).wait();
  if (f == Form::plan) {
    agx::Plan p = g.plan_in_place(r);
    p.start();
    p.wait();
  }
}
template <class C, class D>
void call_v(Form f, const agx::Allgather<int>& g, std::span<const int> s, std::span<int> r,
            const C& counts, const D& displs) {
  if (f == Form::blocking) g.v(s, r, counts, displs);
  if (f == Form::start) g.start_v(s, r, counts, displs).wait();
  if (f == Form::plan) {
    agx::Plan p = g.plan_v(s, r, counts, displs);
    p.start();
    p.wait();
  }
}
template <class C, class D>
void call_v_in_place(Form f, const agx::Allgather<int>& g, std::span<int> r, const C& counts,
                     const D& displs) {
  if (f == Form::blocking) g.v_in_place(r, counts, displs);
  if (f == Form::start) g.start_v_in_place(r, counts, displs).wait();
  if (f == Form::plan) {
    agx::Plan p = g.plan_v_in_place(r, counts, displs);
    p.start();
    p.wait();
  }
}

/// `call` must throw agx::Error of `want_class` whose message contains `want_text`, and
/// leave `buf` (receive region and guards) untouched.
template <class F>
void expect_error(const std::string& what, int want_class, const std::string& want_text,
                  Buffer& buf, F&& call) {
  buf.reset();
  try {
    call();
    fail(what + ": accepted");
    return;
  } catch (const agx::Error& e) {
    if (e.error_class() != want_class || std::strstr(e.what(), want_text.c_str()) == nullptr) {
      fail(what + ": class " + std::to_string(e.error_class()) + " '" + e.what() +
           "' (wanted class " + std::to_string(want_class) + ", '" + want_text + "')");
      return;
    }
  } catch (const std::exception& e) {
    fail(what + ": not an agx::Error: " + e.what());
    return;
  }
  if (!buf.untouched()) {
    fail(what + ": wrote to the receive buffer or its guards");
    return;
  }
  ++passes;
}

std::vector<int> own_block(int r, int count) {
  std::vector<int> b(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) b[static_cast<std::size_t>(i)] = r * 1000 + i + 1;
  return b;
}

/// The v result: block b (counts[b] elements of own_block(b)) at displs[b], sentinel elsewhere.
std::vector<int> v_result(std::size_t size, const std::vector<int>& counts, const std::vector<int>& displs) {
  std::vector<int> want(size, sentinel);
  for (int b = 0; b < n; ++b) {
    const auto u = static_cast<std::size_t>(b);
    const auto blk = own_block(b, counts[u]);
    std::copy(blk.begin(), blk.end(), want.begin() + displs[u]);
  }
  return want;
}

// Bad arguments, each through all three forms, on every rank.
void bad_arguments(MPI_Comm comm, const char* comm_name) {
  const auto un = static_cast<std::size_t>(n);
  int me = 0;  // the rank in comm
  MPI_Comm_rank(comm, &me);
  const agx::Allgather<int> g(comm);
  const std::vector<int> send(4, 7);
  Buffer buf(4 * un + 8);
  const std::span<int> all = buf.all();
  std::vector<int> counts(un, 4), displs(un);
  for (std::size_t i = 0; i < un; ++i) displs[i] = static_cast<int>(4 * i);
  for (const Form f : forms) {
    const std::string at = std::string(comm_name) + " " + name(f) + " ";
    const agx::Options radix1{.algorithm = agx::Algorithm::bruck, .radix = 1};
    const agx::Options ring4{.algorithm = agx::Algorithm::ring, .radix = 4};
    const agx::Options auto4{.radix = 4};
    expect_error(at + "recv-too-small", MPI_ERR_COUNT, "receive buffer holds " + std::to_string(4 * un - 1), buf,
                 [&] { call(f, g, send, all.first(4 * un - 1)); });
    expect_error(at + "null-send", MPI_ERR_BUFFER, "send buffer is null", buf,
                 [&] { call(f, g, std::span<const int>(static_cast<const int*>(nullptr), 4), all); });
    expect_error(at + "null-recv", MPI_ERR_BUFFER, "receive buffer is null", buf,
                 [&] { call(f, g, send, std::span<int>(static_cast<int*>(nullptr), 4 * un)); });
    expect_error(at + "send-recv-overlap", MPI_ERR_BUFFER, "send and receive buffers overlap", buf,
                 [&] { call(f, g, all.subspan(2, 4), all.first(4 * un)); });
    expect_error(at + "radix-1", MPI_ERR_ARG, "the radix must be 2 or more", buf,
                 [&] { call(f, agx::Allgather<int>(comm, radix1), send, all); });
    expect_error(at + "radix-for-ring", MPI_ERR_ARG, "algorithm 'ring' takes no parameters", buf,
                 [&] { call(f, agx::Allgather<int>(comm, ring4), send, all); });
    expect_error(at + "radix-for-auto", MPI_ERR_ARG, "needs a forced algorithm that takes a radix", buf,
                 [&] { call(f, agx::Allgather<int>(comm, auto4), send, all); });
    expect_error(at + "null-comm", MPI_ERR_COMM, "MPI_COMM_NULL", buf,
                 [&] { call(f, agx::Allgather<int>(MPI_COMM_NULL), send, all); });
    if (n > 1)
      expect_error(at + "in-place-size", MPI_ERR_COUNT, "not a multiple of the rank count", buf,
                   [&] { call_in_place(f, g, all.first(4 * un + 1)); });
    expect_error(at + "in-place-null-recv", MPI_ERR_BUFFER, "receive buffer is null", buf,
                 [&] { call_in_place(f, g, std::span<int>(static_cast<int*>(nullptr), 4 * un)); });

    auto bad_counts = counts;
    bad_counts[un - 1] = -1;
    expect_error(at + "v-negative-count", MPI_ERR_COUNT, "negative count -1 at index " + std::to_string(n - 1),
                 buf, [&] { call_v(f, g, send, all, bad_counts, displs); });
    expect_error(at + "v-in-place-negative-count", MPI_ERR_COUNT, "negative count", buf,
                 [&] { call_v_in_place(f, g, all, bad_counts, displs); });
    auto bad_displs = displs;
    bad_displs[0] = -4;
    expect_error(at + "v-negative-displacement", MPI_ERR_COUNT, "negative displacement -4 at index 0",
                 buf, [&] { call_v(f, g, send, all, counts, bad_displs); });
    bad_displs[0] = static_cast<int>(all.size()) - 2;
    expect_error(at + "v-displacement-past-end", MPI_ERR_ARG, "block 0 (displacement " +
                 std::to_string(all.size() - 2) + ", count 4) ends past the receive buffer", buf,
                 [&] { call_v(f, g, send, all, counts, bad_displs); });
    expect_error(at + "v-in-place-displacement-past-end", MPI_ERR_ARG, "ends past the receive buffer", buf,
                 [&] { call_v_in_place(f, g, all, counts, bad_displs); });
    const std::vector<int> long_counts(un + 1, 4);
    expect_error(at + "v-counts-length", MPI_ERR_ARG, "counts and displacements need " + std::to_string(n),
                 buf, [&] { call_v(f, g, send, all, long_counts, displs); });
    const std::vector<int> short_displs(un - 1, 0);
    expect_error(at + "v-displs-length", MPI_ERR_ARG, "counts and displacements need " + std::to_string(n),
                 buf, [&] { call_v_in_place(f, g, all, counts, short_displs); });
    std::vector<long long> huge(un, 4);
    huge[0] = LLONG_MAX / 2;
    expect_error(at + "v-overflowing-count", MPI_ERR_COUNT, "overflows the byte size", buf,
                 [&] { call_v(f, g, send, all, huge, displs); });
    expect_error(at + "v-send-size", MPI_ERR_COUNT, "send has 3 elements but counts[" + std::to_string(me) + "] is 4",
                 buf, [&] { call_v(f, g, std::span<const int>(send).first(3), all, counts, displs); });
    expect_error(at + "v-send-recv-overlap", MPI_ERR_BUFFER, "send and receive buffers overlap", buf,
                 [&] { call_v(f, g, all.subspan(4 * un, 4), all, counts, displs); });
    expect_error(at + "v-null-recv", MPI_ERR_BUFFER, "receive buffer is null", buf,
                 [&] { call_v(f, g, send, std::span<int>(static_cast<int*>(nullptr), 4 * un), counts, displs); });
  }
  // The byte level: a layout of the wrong rank count, a null receive buffer.
  std::vector<std::size_t> sizes(un + 1, 16), offsets(un + 1, 0);
  for (std::size_t i = 0; i <= un; ++i) offsets[i] = 16 * i;
  const agx::Layout wrong = agx::Layout::varying(sizes, offsets);
  const agx::Buffers bytes{send.data(), all.data(), false};
  expect_error(std::string(comm_name) + " start_allgather_bytes-layout-ranks", MPI_ERR_ARG,
               "layout has " + std::to_string(n + 1) + " blocks", buf,
               [&] { agx::start_allgather_bytes(comm, bytes, wrong).wait(); });
  expect_error(std::string(comm_name) + " plan_allgather_bytes-layout-ranks", MPI_ERR_ARG,
               "layout has " + std::to_string(n + 1) + " blocks", buf,
               [&] { agx::plan_allgather_bytes(comm, bytes, wrong).start(); });
  expect_error(std::string(comm_name) + " start_allgather_bytes-null-recv", MPI_ERR_BUFFER,
               "receive buffer is null", buf, [&] {
                 agx::start_allgather_bytes(comm, {send.data(), nullptr, false},
                                            agx::Layout::uniform(n, 16)).wait();
               });
  if (n >= 2) {
    MPI_Comm half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    const int color = me < n / 2 ? 0 : 1;
    MPI_Comm_split(comm, color, me, &half);
    MPI_Intercomm_create(half, 0, comm, color == 0 ? n / 2 : 0, 99, &inter);
    for (const Form f : forms)
      expect_error(std::string(comm_name) + " " + name(f) + " inter-communicator", MPI_ERR_COMM,
                   "inter-communicators are not supported", buf,
                   [&] { call(f, agx::Allgather<int>(inter), send, all); });
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
}

// v blocks that overlap one another: MPI_ERR_ARG naming both, through every form, out of
// place and in place; layouts that look close but are legal gather correctly.
void overlapping_blocks(MPI_Comm comm) {
  const auto un = static_cast<std::size_t>(n);
  const agx::Allgather<int> g(comm);
  int me = 0;  // the rank in comm
  MPI_Comm_rank(comm, &me);
  Buffer buf(4 * un + 8);
  const std::span<int> all = buf.all();
  struct Case {
    const char* what;
    std::vector<int> counts, displs;
    int a, b;  // the blocks the error names
  };
  std::vector<Case> bad;
  if (n >= 2) {
    // Ascending, block 1 starts inside block 0.
    Case up{"ascending", std::vector<int>(un, 4), std::vector<int>(un), 0, 1};
    for (std::size_t i = 0; i < un; ++i) up.displs[i] = static_cast<int>(4 * i + 4);
    up.displs[1] = 6;
    if (n > 2) up.displs[2] = 12;
    bad.push_back(up);
    // Reverse order (the sorted path): blocks n-2 and n-1 overlap.
    Case down{"reverse order", std::vector<int>(un, 4), std::vector<int>(un), n - 2, n - 1};
    for (std::size_t i = 0; i < un; ++i) down.displs[i] = static_cast<int>(4 * (un - 1 - i) + 4);
    down.displs[un - 2] = 6;
    bad.push_back(down);
    // Every block at displacement 0.
    bad.push_back({"same displacement", std::vector<int>(un, 4), std::vector<int>(un, 0), 0, 1});
    // The last block holds the whole region, the others lie inside it; an empty block
    // first (it takes no room) and the earlier blocks in reverse order.
    Case inside{"one block inside another", std::vector<int>(un, 2), std::vector<int>(un), 0, n - 1};
    for (std::size_t i = 0; i < un; ++i) inside.displs[i] = static_cast<int>(2 * (un - 1 - i));
    inside.counts[un - 1] = static_cast<int>(4 * un);
    inside.displs[un - 1] = 0;
    if (n > 2) {
      inside.counts[0] = 0;
      inside.a = 1;
    }
    bad.push_back(inside);
  }
  for (const Case& c : bad)
    for (const Form f : forms) {
      const std::string text = "blocks " + std::to_string(c.a) + " and " + std::to_string(c.b) +
                               " overlap in the receive buffer";
      const std::vector<int> send(static_cast<std::size_t>(c.counts[static_cast<std::size_t>(me)]), 9);
      expect_error(std::string("v overlap ") + c.what + " " + name(f), MPI_ERR_ARG, text, buf,
                   [&] { call_v(f, g, send, all, c.counts, c.displs); });
      expect_error(std::string("v_in_place overlap ") + c.what + " " + name(f), MPI_ERR_ARG, text, buf,
                   [&] { call_v_in_place(f, g, all, c.counts, c.displs); });
    }
  // Legal: blocks that touch (in reverse order), and empty blocks placed inside others.
  std::vector<int> counts(un, 4), displs(un);
  for (std::size_t i = 0; i < un; ++i) displs[i] = static_cast<int>(4 * (un - 1 - i) + 3);
  counts[0] = 0;
  displs[0] = n > 1 ? displs[un - 1] + 1 : 0;  // inside block n-1 (or alone)
  if (n > 2) {
    counts[1] = 0;
    displs[1] = displs[2];  // where block 2 starts
  }
  const std::vector<int> want = v_result(all.size(), counts, displs);
  for (const Form f : forms) {
    buf.reset();
    const std::vector<int> mine = own_block(me, counts[static_cast<std::size_t>(me)]);
    try {
      call_v(f, g, mine, all, counts, displs);
      if (buf.holds(want)) ++passes;
      else fail(std::string("v touching and empty blocks ") + name(f) + ": wrong result or guards");
      buf.reset();
      std::copy(mine.begin(), mine.end(), all.begin() + displs[static_cast<std::size_t>(me)]);
      call_v_in_place(f, g, all, counts, displs);
      if (buf.holds(want)) ++passes;
      else fail(std::string("v_in_place touching and empty blocks ") + name(f) + ": wrong result or guards");
    } catch (const agx::Error& e) {
      fail(std::string("v touching and empty blocks ") + name(f) + ": rejected: " + e.what());
    }
  }
}

// A bad call made by the last rank alone on a communicator agx has not set up fails
// before anything moves: every rank then gathers correctly there (a stray message or
// a set-up begun by the bad call would hang this or gather garbage; alarm ends a hang).
void alone_on_new_comm() {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const auto un = static_cast<std::size_t>(n);
  const agx::Allgather<int> g(comm);
  Buffer buf(4 * un + 8);
  const std::span<int> all = buf.all();
  std::vector<int> counts(un, 4), displs(un, 0);
  if (rank == n - 1) {
    const std::vector<int> send(4, 5);
    expect_error("alone: start recv-too-small", MPI_ERR_COUNT, "receive buffer holds", buf,
                 [&] { g.start(send, all.first(4 * un - 1)).wait(); });
    expect_error("alone: plan null-recv", MPI_ERR_BUFFER, "receive buffer is null", buf,
                 [&] { g.plan(send, std::span<int>(static_cast<int*>(nullptr), 4 * un)).start(); });
    if (n >= 2)
      expect_error("alone: start_v overlap", MPI_ERR_ARG, "overlap in the receive buffer", buf,
                   [&] { g.start_v(send, all, counts, displs).wait(); });
    expect_error("alone: plan_v_in_place past end", MPI_ERR_ARG, "ends past the receive buffer", buf, [&] {
      auto far = displs;
      far[0] = static_cast<int>(all.size());
      g.plan_v_in_place(all, counts, far).start();
    });
  }
  alarm(120);
  const std::vector<int> mine = own_block(rank, 4);
  std::vector<int> want(all.size(), sentinel);
  for (int b = 0; b < n; ++b) {
    const auto blk = own_block(b, 4);
    std::copy(blk.begin(), blk.end(), want.begin() + 4 * b);
  }
  for (const Form f : {Form::start, Form::plan, Form::blocking}) {
    buf.reset();
    call(f, g, mine, all.first(4 * un));
    if (buf.holds(want)) ++passes;
    else fail(std::string("alone: the call after the bad ones (") + name(f) + ") gathered wrongly");
  }
  alarm(0);
  MPI_Comm_free(&comm);
}

// Empty and moved-from requests and plans.
void empty_handles() {
  const auto un = static_cast<std::size_t>(n);
  const agx::Allgather<int> g(MPI_COMM_WORLD);
  Buffer buf(4 * un);
  const std::vector<int> mine = own_block(rank, 4);
  std::vector<int> want;
  for (int b = 0; b < n; ++b) {
    const auto blk = own_block(b, 4);
    want.insert(want.end(), blk.begin(), blk.end());
  }
  auto expect_empty_request = [&](const char* what, agx::Request& r) {
    if (!r.test() || r.active() || r.algorithm() != agx::Algorithm::automatic)
      return fail(std::string(what) + ": not empty and complete");
    r.wait();
    ++passes;
  };
  auto expect_empty_plan = [&](const char* what, agx::Plan& p) {
    if (!p.test() || p.active() || p.starts() != 0 || p.algorithm() != agx::Algorithm::automatic)
      return fail(std::string(what) + ": not empty and complete");
    p.wait();
    expect_error(std::string(what) + ": start()", MPI_ERR_REQUEST, "start() on an empty agx::Plan",
                 buf, [&] { p.start(); });
  };
  agx::Request none;
  expect_empty_request("default Request", none);
  agx::Plan no_plan;
  expect_empty_plan("default Plan", no_plan);

  buf.reset();
  agx::Request r = g.start(mine, buf.all());
  agx::Request taken(std::move(r));
  expect_empty_request("moved-from Request", r);  // NOLINT(bugprone-use-after-move)
  taken.wait();
  if (!buf.holds(want)) fail("the request moved to: wrong result");
  agx::Request assigned;
  assigned = std::move(taken);
  expect_empty_request("moved-from Request (assigned)", taken);  // NOLINT(bugprone-use-after-move)
  if (!assigned.test() || assigned.active()) fail("the request assigned to: not complete");
  else ++passes;

  buf.reset();
  agx::Plan p = g.plan(mine, buf.all());
  agx::Plan moved(std::move(p));
  expect_empty_plan("moved-from Plan", p);  // NOLINT(bugprone-use-after-move)
  for (int i = 0; i < 2; ++i) {
    moved.start();
    moved.wait();
  }
  if (!buf.holds(want) || moved.starts() != 2) fail("the plan moved to: wrong result or starts");
  agx::Plan other;
  other = std::move(moved);
  expect_empty_plan("moved-from Plan (assigned)", moved);  // NOLINT(bugprone-use-after-move)
  buf.reset();
  other.start();
  other.wait();
  if (!buf.holds(want)) fail("the plan assigned to: wrong result");
  else ++passes;
}

// Every entry point while MPI may not be called (before MPI_Init, after MPI_Finalize):
// MPI_ERR_OTHER naming the call that is missing or done, nothing written.
void outside_mpi(const char* when, const char* text) {
  const int np = 2;  // (no rank count to ask for)
  const agx::Allgather<int> g(MPI_COMM_WORLD);
  Buffer buf(8);
  const std::span<int> all = buf.all();
  const std::vector<int> send(4, 3), counts(np, 4), displs{0, 4};
  for (const Form f : forms) {
    const std::string at = std::string(when) + " " + name(f) + " ";
    expect_error(at + "out of place", MPI_ERR_OTHER, text, buf, [&] { call(f, g, send, all); });
    expect_error(at + "in place", MPI_ERR_OTHER, text, buf, [&] { call_in_place(f, g, all); });
    expect_error(at + "v", MPI_ERR_OTHER, text, buf, [&] { call_v(f, g, send, all, counts, displs); });
    expect_error(at + "v in place", MPI_ERR_OTHER, text, buf, [&] { call_v_in_place(f, g, all, counts, displs); });
  }
  const agx::Buffers bytes{send.data(), all.data(), false};
  expect_error(std::string(when) + " start_allgather_bytes", MPI_ERR_OTHER, text, buf,
               [&] { agx::start_allgather_bytes(MPI_COMM_WORLD, bytes, agx::Layout::uniform(np, 16)).wait(); });
  expect_error(std::string(when) + " plan_allgather_bytes", MPI_ERR_OTHER, text, buf,
               [&] { agx::plan_allgather_bytes(MPI_COMM_WORLD, bytes, agx::Layout::uniform(np, 16)).start(); });
  // Empty handles need no MPI.
  agx::Request r;
  agx::Plan p;
  if (!r.test() || !p.test()) fail(std::string(when) + ": an empty handle is not complete");
  r.wait();
  p.wait();
  expect_error(std::string(when) + " empty Plan start()", MPI_ERR_REQUEST, "empty agx::Plan", buf,
               [&] { p.start(); });
}

}  // namespace

int main(int argc, char** argv) {
  outside_mpi("before MPI_Init:", "before MPI_Init");
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  // A plan kept past MPI_Finalize (the docs say: destroy it before) and a complete request.
  Buffer kept_buf(4 * static_cast<std::size_t>(n));
  const std::vector<int> kept_send(4, rank);
  agx::Plan kept;
  agx::Request kept_request;
  try {
    MPI_Comm reversed = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, 0, n - 1 - rank, &reversed);
    alone_on_new_comm();  // first: world is not set up by agx yet
    bad_arguments(MPI_COMM_WORLD, "world");
    bad_arguments(reversed, "reversed");
    overlapping_blocks(MPI_COMM_WORLD);
    overlapping_blocks(reversed);
    empty_handles();
    MPI_Comm_free(&reversed);
    kept = agx::Allgather<int>(MPI_COMM_WORLD).plan(kept_send, kept_buf.all());
    kept.start();
    kept.wait();
    kept_request = agx::Allgather<int>(MPI_COMM_WORLD).start(kept_send, kept_buf.all());
    kept_request.wait();
  } catch (const std::exception& e) {
    fail(std::string("unexpected exception: ") + e.what());
  }
  int totals[2] = {passes, failures}, sums[2] = {0, 0};
  MPI_Reduce(totals, sums, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) std::printf("test_nb_bad N=%d: %d passed, %d failed\n", n, sums[0], sums[1]);
  MPI_Finalize();

  outside_mpi("after MPI_Finalize:", "after MPI_Finalize");
  kept_buf.reset();
  expect_error("after MPI_Finalize: start() of a plan made before", MPI_ERR_OTHER,
               "after MPI_Finalize", kept_buf, [&] { kept.start(); });
  if (!kept.test() || kept.active() || !kept_request.test())
    fail("after MPI_Finalize: a complete plan or request is not complete");
  kept.wait();
  kept_request.wait();
  {  // destroyed after MPI_Finalize (the last references to world's agx state): no MPI call
    agx::Request gone_request = std::move(kept_request);
    agx::Plan gone = std::move(kept);
  }
  std::printf("test_nb_bad rank %d outside MPI: %d passed, %d failed in all\n", rank, passes, failures);
  return failures == 0 ? 0 : 1;
}
