// Fused all-gathers (include/agx/fused.hpp, docs/fused.md): K members run as one
// all-gather over the concatenated layout, whose block i is member 0's block i, then
// member 1's, ... Three ways to run it:
//   direct:    the members' receive buffers already hold each rank's pieces back to back:
//              the fused layout addresses them where they are. The own pieces of
//              out-of-place members are copied to their places first (what a single
//              out-of-place call copies too), and the call runs in place.
//   segmented: otherwise: every fused block is the list of its pieces in the members'
//              receive buffers. On a point-to-point schedule the executor sends a
//              transfer's pieces as one hindexed datatype over MPI_BOTTOM
//              (Execution::use_block_pieces); on the node paths (shared_memory,
//              hierarchical) the node stage gathers the own pieces straight into the
//              node's shared segment and scatters every block from there straight into
//              its pieces (hier::run_pieces, hier::start_node_call with pieces; the
//              leaders' exchange moves ranges of the segment as before). Only the own
//              pieces of out-of-place members are copied, as in direct.
//   staged:    under AGX_INTEGRITY / AGX_TEST_FLIP (whose per-round and end-to-end
//              checksums read blocks as ranges of one buffer): the own pieces are copied
//              into one staging buffer at the own fused block, the call runs in place
//              there, and every piece is copied out to its member's receive buffer.
// All run in place, so that ranks running one way and ranks running another make the
// same kind of call (AGX_CHECK compares in-place use across ranks). Whether a call runs
// segmented depends only on the algorithm and the settings, the same on every rank. On
// a node path a rank whose group is direct runs the node call of pieces too (its pieces
// are its blocks' ranges): the node stage's variants differ for pieces (no single copy,
// no direct write, hier/block_pieces.hpp), and every rank of a node call must run the same.
// A call of several members runs its path itself (run_ranges, start_running), never
// through the entry points, whose lib/cuda agreement on memory kinds is collective: a
// direct rank making it while a segmented rank does not would wait forever. A member
// alone is the call it would be without the group, on every rank.

#include <agx/error.hpp>
#include <agx/fused.hpp>

#include "api/context.hpp"
#include "api/dispatch.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/consistency.hpp"
#include "core/copy.hpp"
#include "core/executor.hpp"
#include "core/message.hpp"
#include "core/nonblocking.hpp"
#include "core/select.hpp"
#include "cuda/memory.hpp"
#include "fused/decision.hpp"
#include "hier/hier.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

namespace agx {

namespace {

std::byte* piece_address(const FusedPart& p, int block) {
  return static_cast<std::byte*>(p.buffers.recv) + p.offsets[static_cast<std::size_t>(block)];
}

/// The fused layout of a group and how it runs.
struct FusedPlan {
  int nranks = 0;
  int rank = 0;
  std::vector<std::size_t> bytes, offsets;  // fused block i: bytes and offset
  std::size_t total = 0;
  bool direct = false;
  Buffers buffers;  // direct: the members' own memory; otherwise filled by the caller
  Layout layout() const { return Layout::varying(bytes, offsets); }
};

void check_parts(MPI_Comm comm, std::span<const FusedPart> parts, int& n, int& me) {
  if (comm == MPI_COMM_NULL) throw Error(MPI_ERR_COMM, "agx: fused group on MPI_COMM_NULL");
  if (MPI_Comm_size(comm, &n) != MPI_SUCCESS || MPI_Comm_rank(comm, &me) != MPI_SUCCESS)
    throw Error(MPI_ERR_COMM, "agx: fused group on an invalid communicator");
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const FusedPart& p = parts[k];
    if (p.bytes.size() != static_cast<std::size_t>(n) || p.offsets.size() != p.bytes.size())
      throw Error(MPI_ERR_ARG, "agx: fused member " + std::to_string(k) + " has " +
                                   std::to_string(p.bytes.size()) + " blocks for " +
                                   std::to_string(n) + " ranks");
    if (cuda::is_device_memory(p.buffers.recv) ||
        (!p.buffers.in_place && cuda::is_device_memory(p.buffers.send)))
      throw Error(MPI_ERR_BUFFER, "agx: fused member " + std::to_string(k) +
                                      " is in device memory; fused groups take host buffers");
  }
}

/// Whether the members' pieces of every rank lie back to back; then fills the direct
/// buffers and offsets (relative to the lowest block start).
bool try_direct(std::span<const FusedPart> parts, FusedPlan& f) {
  std::vector<std::uintptr_t> start(static_cast<std::size_t>(f.nranks), 0);
  std::uintptr_t base = UINTPTR_MAX;
  for (int i = 0; i < f.nranks; ++i) {
    std::uintptr_t next = 0;  // where the next non-empty piece must begin
    bool any = false;
    for (const FusedPart& p : parts) {
      const std::size_t b = p.bytes[static_cast<std::size_t>(i)];
      if (b == 0) continue;
      const auto a = reinterpret_cast<std::uintptr_t>(piece_address(p, i));
      if (any && a != next) return false;
      if (!any) start[static_cast<std::size_t>(i)] = a;
      any = true;
      next = a + b;
    }
    if (any && start[static_cast<std::size_t>(i)] < base) base = start[static_cast<std::size_t>(i)];
  }
  if (base == UINTPTR_MAX) base = reinterpret_cast<std::uintptr_t>(parts.front().buffers.recv);
  for (int i = 0; i < f.nranks; ++i) {
    const auto u = static_cast<std::size_t>(i);
    f.offsets[u] = f.bytes[u] == 0 ? 0 : start[u] - base;
  }
  f.buffers = {nullptr, reinterpret_cast<void*>(base), true};
  return true;
}

/// The fused layout of `parts` (checked already) on a communicator of `n` ranks.
FusedPlan plan_fused(int n, int me, std::span<const FusedPart> parts) {
  FusedPlan f;
  f.nranks = n;
  f.rank = me;
  f.bytes.assign(static_cast<std::size_t>(f.nranks), 0);
  f.offsets.assign(static_cast<std::size_t>(f.nranks), 0);
  for (int i = 0; i < f.nranks; ++i) {
    const auto u = static_cast<std::size_t>(i);
    for (const FusedPart& p : parts) f.bytes[u] += p.bytes[u];
    if (__builtin_add_overflow(f.total, f.bytes[u], &f.total))
      throw Error(MPI_ERR_COUNT, "agx: the fused group's blocks overflow the byte size");
  }
  if (parts.empty()) return f;
  f.direct = try_direct(parts, f);
  if (!f.direct) {  // staged: rank-major concatenation
    std::size_t at = 0;
    for (int i = 0; i < f.nranks; ++i) {
      f.offsets[static_cast<std::size_t>(i)] = at;
      at += f.bytes[static_cast<std::size_t>(i)];
    }
  }
  return f;
}

/// Direct: the own pieces of out-of-place members to their places in the receive buffers.
void place_own(std::span<const FusedPart> parts, const FusedPlan& f) {
  for (const FusedPart& p : parts) {
    const std::size_t b = p.bytes[static_cast<std::size_t>(f.rank)];
    if (b > 0 && !p.buffers.in_place) copy_bytes(piece_address(p, f.rank), p.buffers.send, b);
  }
}

/// Segmented: every fused block as the list of its pieces in the members' receive
/// buffers (the own pieces of out-of-place members must be in place already).
BlockPieces block_pieces(std::span<const FusedPart> parts, const FusedPlan& f) {
  BlockPieces bp;
  for (int i = 0; i < f.nranks; ++i) {
    bp.begin.push_back(bp.segments.size());
    for (const FusedPart& p : parts) {
      const std::size_t b = p.bytes[static_cast<std::size_t>(i)];
      if (b > 0) bp.segments.push_back({piece_address(p, i), b});
    }
  }
  bp.begin.push_back(bp.segments.size());
  return bp;
}

/// Whether a fused call of `a` can run segmented: no checksums or flip seam (they read
/// blocks as ranges of one buffer). Rank-independent.
bool can_segment(const AlgorithmChoice& a) {
  const Checks c = Checks::of(a.id);
  return !c.integrity && !c.flip;
}

/// Whether a fused call of `a` runs as a node call of pieces on every rank, direct
/// ranks included (see the header comment).
bool node_pieces(const AlgorithmChoice& a) { return is_node_path(a.id) && can_segment(a); }

/// A receive buffer of the group to name in the checks of a call that is not direct
/// (the first that is not null: an empty member's may be).
void* some_recv(std::span<const FusedPart> parts) {
  for (const FusedPart& p : parts)
    if (p.buffers.recv != nullptr) return p.buffers.recv;
  return parts.front().buffers.recv;
}

/// Staged: the own pieces into the own fused block of `arena`.
void pack_own(std::span<const FusedPart> parts, const FusedPlan& f, std::byte* arena) {
  std::byte* at = arena + f.offsets[static_cast<std::size_t>(f.rank)];
  for (const FusedPart& p : parts) {
    const std::size_t b = p.bytes[static_cast<std::size_t>(f.rank)];
    if (b == 0) continue;
    const void* from = p.buffers.in_place ? piece_address(p, f.rank) : p.buffers.send;
    copy_bytes(at, from, b);
    at += b;
  }
}

/// Staged: every piece from `arena` into its member's receive buffer (an in-place
/// member's own piece is there already).
void unpack(std::span<const FusedPart> parts, const FusedPlan& f, const std::byte* arena) {
  for (int i = 0; i < f.nranks; ++i) {
    const std::byte* at = arena + f.offsets[static_cast<std::size_t>(i)];
    for (const FusedPart& p : parts) {
      const std::size_t b = p.bytes[static_cast<std::size_t>(i)];
      if (b == 0) continue;
      if (!(i == f.rank && p.buffers.in_place)) copy_bytes(piece_address(p, i), at, b);
      at += b;
    }
  }
}

}  // namespace

namespace detail {

/// One all-gather of a group: a fused call of several members, or a member's own call
/// (a group of one, which always runs direct).
struct FusedCall {
  std::vector<FusedPart> parts;
  FusedPlan plan;
  FusedWay way = FusedWay::staged;
  std::vector<std::byte> arena;
  BlockPieces pieces;                 // segmented (and direct on a node path)
  std::shared_ptr<CommContext> ctx;   // segmented: alive past MPI_Comm_free
  std::optional<Execution> execution; // segmented, point-to-point
  Algorithm algorithm = Algorithm::automatic;  // segmented
  Request request;  // last: destroyed (waited for) before the arena and the pieces
  bool unpacked = false;

  bool test_running() {
    if (execution) {
      detail::progress_all();
      return execution->test();
    }
    return request.test();
  }
  void wait_running() {
    if (execution) wait_blocking(*execution);
    else request.wait();
  }
  void finish() {
    if (!unpacked && way == FusedWay::staged) unpack(parts, plan, arena.data());
    unpacked = true;
  }
  bool test() {
    if (unpacked) return true;
    if (!test_running()) return false;
    finish();
    return true;
  }
  void wait() {
    if (unpacked) return;
    wait_running();
    finish();
  }
  Algorithm ran() { return execution ? algorithm : request.algorithm(); }
};

struct FusedState {
  std::vector<std::unique_ptr<FusedCall>> calls;

  /// The call that moves the most bytes (the first of those): what the group reports.
  FusedCall* largest() const {
    FusedCall* best = nullptr;
    for (const auto& c : calls)
      if (best == nullptr || c->plan.total > best->plan.total) best = c.get();
    return best;
  }
};

void FusedStateDeleter::operator()(FusedState* s) const noexcept {
  for (auto& c : s->calls) {
    try {
      c->wait();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "agx: an unfinished fused request failed: %s\n", e.what());
    }
  }
  delete s;
}

}  // namespace detail

namespace {

/// The context of a fused call of several members (a layout that is not direct is the
/// rank-major one of the staging buffer; only the sizes matter for the choice).
CommContext& fused_context(MPI_Comm comm, const FusedPlan& f, void* some_recv) {
  check_config();
  return checked_context(comm, {nullptr, some_recv, true}, f.layout());
}

/// One call of a group's decision: its members and the options it runs with.
struct CallPlan {
  std::vector<std::size_t> members;
  Options options;
};

bool forced(const Options& o) {
  const Config& c = config();
  return o.algorithm != Algorithm::automatic ||
         (o.use_environment && (c.forced.has_value() || process_settings().invalid_of("AGX_ALGO")));
}

/// Recent decisions (lib/fused/decision.hpp), keyed by context, settings and the
/// members' block sizes. Cleared whenever a context is deleted, since a new one may
/// take its address.
struct DecisionCache {
  using Key = std::tuple<const CommContext*, int, std::vector<std::vector<std::size_t>>>;
  std::mutex mutex;
  std::uint64_t deletions = 0;
  std::map<Key, std::vector<FusionCall>> entries;
};

std::vector<FusionCall> cached_decision(CommContext& ctx, std::span<const FusedPart> parts,
                                        const FusionSettings& settings) {
  static DecisionCache cache;
  std::vector<std::vector<std::size_t>> bytes;
  bytes.reserve(parts.size());
  for (const FusedPart& p : parts) bytes.push_back(p.bytes);
  DecisionCache::Key key{&ctx, (settings.segments ? 1 : 0) | (settings.node_paths ? 2 : 0),
                         std::move(bytes)};
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.deletions != CommContext::deletions() || cache.entries.size() >= 256) {
    cache.entries.clear();
    cache.deletions = CommContext::deletions();
  }
  if (auto it = cache.entries.find(key); it != cache.entries.end()) return it->second;
  std::vector<FusionCall> calls = decide_fusion(ctx.selector(), std::get<2>(key), settings).calls;
  cache.entries.emplace(std::move(key), calls);
  return calls;
}

/// How the group runs: one fused call with the options as given when an algorithm is
/// forced (or there is one member); else the decision's calls, a fused one on the
/// algorithm it was priced for, a member alone with the options as given.
std::vector<CallPlan> plan_calls(MPI_Comm comm, std::span<const FusedPart> parts,
                                 const Options& options, const FusedPlan& whole, bool nonblocking) {
  std::vector<CallPlan> out;
  if (parts.size() <= 1 || forced(options)) {
    out.push_back({{}, options});
    for (std::size_t m = 0; m < parts.size(); ++m) out.back().members.push_back(m);
    return out;
  }
  check_config();
  CommContext& ctx = context(comm);
  FusionSettings settings;
  const Checks checks = Checks::of(Algorithm::direct);
  settings.segments = !checks.integrity && !checks.flip;
  if (nonblocking) {  // no node path before the node set-up has begun (hier::node_call_ready)
    std::vector<std::size_t> offsets(whole.bytes.size(), 0);
    settings.node_paths = hier::node_call_ready(ctx, Layout::varying(whole.bytes, offsets));
  }
  for (const FusionCall& c : cached_decision(ctx, parts, settings)) {
    Options o = options;
    if (c.members.size() > 1) {
      o.algorithm = c.algorithm.id;
      o.radix = c.algorithm.radix;
    }
    out.push_back({c.members, o});
  }
  return out;
}

std::vector<FusedPart> subset(std::span<const FusedPart> parts, const std::vector<std::size_t>& members) {
  std::vector<FusedPart> out;
  out.reserve(members.size());
  for (std::size_t m : members) out.push_back(parts[m]);
  return out;
}

/// Runs `a` on `buffers` (in place) as ranges of `layout`: what run_blocking runs for
/// host buffers, without its device-memory agreement (lib/cuda), which a fused call of
/// several members never needs (host buffers only, check_parts) and which every rank
/// must make alike: no rank of a fused call of several members makes it, whatever way
/// its buffers let it take.
void run_ranges(CommContext& ctx, const CallChoice& c, const Buffers& buffers,
                const Layout& layout) {
  const AlgorithmChoice& a = c.algorithm;
  if (c.path == CallPath::own_copy) {
    copy_own_block(buffers, layout, 0);
    return;
  }
  if (c.path == CallPath::node) {
    hier::run(ctx, a.id, buffers, layout);
    return;
  }
  Execution e(ctx.schedule(a), buffers, layout, ctx.comm(), ctx.next_tag(),
              config().max_message_bytes, Checks::of(a.id));
  e.start();
  wait_blocking(e);
}

/// One blocking call over `parts`.
FusedResult run_call(MPI_Comm comm, int n, int me, std::span<const FusedPart> parts,
                     const Options& options) {
  if (parts.size() == 1) {  // a member alone: the call it would be without the group
    const FusedPart& p = parts.front();
    const Layout layout = Layout::varying(p.bytes, p.offsets);
    const Algorithm a = allgather_bytes(comm, p.buffers, layout, options);
    std::size_t total = 0;
    for (std::size_t b : p.bytes) total += b;
    return {a, FusedWay::direct, total};
  }
  // Several members: the options name the algorithm (plan_calls), so the choice here is
  // the same on every rank, whatever way each rank takes.
  FusedPlan f = plan_fused(n, me, parts);
  void* const recv = f.direct ? f.buffers.recv : some_recv(parts);
  CommContext& ctx = fused_context(comm, f, recv);
  const Layout layout = f.layout();
  const CallChoice choice = choose_call(ctx, layout, options, true, CallKind::blocking);
  const AlgorithmChoice a = choice.algorithm;
  FusedResult r{a.id, FusedWay::direct, f.total};
  if (config().check) check_consistency(ctx, layout, a, true);
  const Buffers in_place{nullptr, recv, true};
  if (f.direct || can_segment(a)) {
    r.way = f.direct ? FusedWay::direct : FusedWay::segmented;
    place_own(parts, f);
    if (choice.path == CallPath::own_copy) return r;  // one rank: every piece in place
    if (f.direct && !node_pieces(a)) {
      run_ranges(ctx, choice, f.buffers, layout);
      return r;
    }
    const BlockPieces bp = block_pieces(parts, f);
    if (choice.path == CallPath::node) {
      hier::run_pieces(ctx, a.id, in_place, layout, bp);
      return r;
    }
    Execution e(ctx.schedule(a), in_place, layout, ctx.comm(), ctx.next_tag(),
                config().max_message_bytes, Checks::of(a.id));
    e.use_block_pieces(bp);
    e.start();
    wait_blocking(e);
    return r;
  }
  r.way = FusedWay::staged;
  std::vector<std::byte> arena(f.total);
  pack_own(parts, f, arena.data());
  run_ranges(ctx, choice, {nullptr, arena.data(), true}, layout);
  unpack(parts, f, arena.data());
  return r;
}

/// A node call (hier::start_node_call, of block pieces where given) as an operation of
/// the progress engine, registered like a single nonblocking call: whatever advances
/// this process's running calls advances it too (a blocking call on the communicator
/// first lets the node calls queued before it claim their regions of the segment; the
/// progress thread).
class NodeOperation final : public detail::Operation {
 public:
  NodeOperation(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                const Layout& layout, const BlockPieces* pieces)
      : Operation(a, layout), ctx_(ctx.share()), buffers_(buffers), pieces_(pieces) {}

 private:
  void do_start() override {
    call_ = hier::start_node_call(*ctx_, choice().id, buffers_, layout(), pieces_);
  }
  bool do_test() override { return hier::test_node_call(*call_); }

  std::shared_ptr<CommContext> ctx_;  // kept alive past MPI_Comm_free
  Buffers buffers_;
  const BlockPieces* pieces_;  // the FusedCall's, which outlives the request
  hier::NodeCallPtr call_;
};

/// Starts `a` on `buffers` (in place), blocks as pieces where `pieces` is not null;
/// like run_ranges, without lib/cuda's agreement.
void start_running(detail::FusedCall& s, CommContext& ctx, const AlgorithmChoice& a,
                   const Buffers& buffers, const Layout& layout, const BlockPieces* pieces) {
  s.ctx = ctx.share();
  s.algorithm = a.id;
  if (is_node_path(a.id)) {
    detail::OperationPtr op(new NodeOperation(ctx, a, buffers, layout, pieces));
    detail::progress_register(op.get());
    op->start();
    s.request = Request(std::move(op));
    return;
  }
  s.execution.emplace(ctx.schedule(a), buffers, layout, ctx.comm(), ctx.next_tag(),
                      config().max_message_bytes, Checks::of(a.id));
  if (pieces != nullptr) s.execution->use_block_pieces(*pieces);
  s.execution->start();
}

/// One nonblocking call over `parts` (copied into the call).
std::unique_ptr<detail::FusedCall> start_call(MPI_Comm comm, int n, int me,
                                              std::vector<FusedPart> parts, const Options& options) {
  auto s = std::make_unique<detail::FusedCall>();
  s->parts = std::move(parts);
  s->plan = plan_fused(n, me, s->parts);
  if (s->parts.size() == 1) {  // a member alone: its own call (its options may leave the
    s->way = FusedWay::direct;  // choice, and the first-call rule, to the entry point)
    place_own(s->parts, s->plan);
    s->request = start_allgather_bytes(comm, s->plan.buffers, s->plan.layout(), options);
    return s;
  }
  // Several members: the options name the algorithm (plan_calls), as in run_call.
  const FusedPlan& f = s->plan;
  void* const recv = f.direct ? f.buffers.recv : some_recv(s->parts);
  CommContext& ctx = fused_context(comm, f, recv);
  const Layout layout = f.layout();  // (a view of s->plan, which the call keeps)
  const AlgorithmChoice a =
      choose_call(ctx, layout, options, true, CallKind::nonblocking).algorithm;
  if (config().check) check_consistency(ctx, layout, a, true);
  if (f.direct || can_segment(a)) {
    s->way = f.direct ? FusedWay::direct : FusedWay::segmented;
    place_own(s->parts, f);
    if (f.direct && !node_pieces(a)) {
      start_running(*s, ctx, a, f.buffers, layout, nullptr);
      return s;
    }
    s->pieces = block_pieces(s->parts, f);
    start_running(*s, ctx, a, {nullptr, recv, true}, layout, &s->pieces);
    return s;
  }
  s->way = FusedWay::staged;
  s->arena.resize(f.total);
  pack_own(s->parts, f, s->arena.data());
  start_running(*s, ctx, a, {nullptr, s->arena.data(), true}, layout, nullptr);
  return s;
}

}  // namespace

FusedResult fused_allgather_bytes(MPI_Comm comm, std::span<const FusedPart> parts,
                                  const Options& options) {
  int n = 0, me = 0;
  check_parts(comm, parts, n, me);
  const FusedPlan whole = plan_fused(n, me, parts);  // the whole group's sizes checked first
  FusedResult r{Algorithm::automatic, FusedWay::direct, whole.total, 0};
  if (parts.empty()) return r;
  std::size_t most = 0;
  for (const CallPlan& c : plan_calls(comm, parts, options, whole, false)) {
    const FusedResult one = c.members.size() == parts.size()
                                ? run_call(comm, n, me, parts, c.options)
                                : run_call(comm, n, me, subset(parts, c.members), c.options);
    if (r.calls++ == 0 || one.bytes > most) {
      r.algorithm = one.algorithm;
      r.way = one.way;
      most = one.bytes;
    }
  }
  return r;
}

FusedRequest start_fused_allgather_bytes(MPI_Comm comm, std::span<const FusedPart> parts,
                                         const Options& options) {
  int n = 0, me = 0;
  check_parts(comm, parts, n, me);
  const FusedPlan whole = plan_fused(n, me, parts);
  std::unique_ptr<detail::FusedState, detail::FusedStateDeleter> s(new detail::FusedState);
  if (parts.empty()) return FusedRequest(std::move(s));
  detail::progress_from_environment();
  // A communicator agx has not set up: its set-up is a collective, which a start must not
  // wait for. Every member then starts alone, as the MPI library's own nonblocking call
  // (the first-call rule of start_allgather_bytes; docs/nonblocking.md). AGX_CHECK's
  // agreement synchronizes anyway: it sets up.
  if (existing_context(comm) == nullptr && !config().check) {
    for (std::size_t m = 0; m < parts.size(); ++m)
      s->calls.push_back(start_call(comm, n, me, subset(parts, {m}), options));
    return FusedRequest(std::move(s));
  }
  for (const CallPlan& c : plan_calls(comm, parts, options, whole, true))
    s->calls.push_back(start_call(comm, n, me, subset(parts, c.members), c.options));
  return FusedRequest(std::move(s));
}

FusedRequest::FusedRequest(std::unique_ptr<detail::FusedState, detail::FusedStateDeleter> s)
    : state_(std::move(s)) {}

FusedRequest& FusedRequest::operator=(FusedRequest&& other) noexcept {
  state_ = std::move(other.state_);  // the deleter waits for the one held so far
  return *this;
}

FusedRequest::~FusedRequest() = default;

bool FusedRequest::test() {
  if (!state_) return true;
  bool done = true;
  for (auto& c : state_->calls) done = c->test() && done;
  return done;
}

void FusedRequest::wait() {
  if (!state_) return;
  for (auto& c : state_->calls) c->wait();
}

bool FusedRequest::active() const {
  if (!state_) return false;
  for (const auto& c : state_->calls)
    if (!c->unpacked) return true;
  return false;
}

Algorithm FusedRequest::algorithm() const {
  detail::FusedCall* c = state_ ? state_->largest() : nullptr;
  return c != nullptr ? c->ran() : Algorithm::automatic;
}

std::size_t FusedRequest::calls() const { return state_ ? state_->calls.size() : 0; }

const char* to_string(FusedWay w) {
  switch (w) {
    case FusedWay::direct: return "direct";
    case FusedWay::segmented: return "segmented";
    case FusedWay::staged: return "staged";
  }
  return "?";
}

FusedWay FusedRequest::way() const {
  detail::FusedCall* c = state_ ? state_->largest() : nullptr;
  return c != nullptr ? c->way : FusedWay::direct;
}

}  // namespace agx
