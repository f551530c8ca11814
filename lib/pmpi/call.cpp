// The interposer's one code path for MPI_Allgather(v) and MPI_Iallgather(v).
//
// Receive side: when every block (count_i elements of recvtype at displ_i * extent)
// is one contiguous run of bytes, agx writes straight into the user's buffer with a
// byte layout. Otherwise agx gathers into a contiguous temporary and each block is
// unpacked by datatype, so nothing outside the receive regions is written.
// Send side: a contiguous send goes straight in; anything else is packed first.
// The bytes on the wire are the type signature's bytes in both cases, so ranks may
// mix contiguous and derived types freely as long as the signatures match.

#include "pmpi/call.hpp"

#include <agx/bytes.hpp>
#include <agx/encoded.hpp>
#include <agx/error.hpp>

#include "api/context.hpp"
#include "api/dispatch.hpp"
#include "codec/encoded_call.hpp"
#include "core/comm_context.hpp"
#include "core/tls.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/select.hpp"
#include "cuda/device_path.hpp"
#include "cuda/memory.hpp"
#include "pmpi/datatype.hpp"
#include "pmpi/fast_call.hpp"
#include "pmpi/raise.hpp"
#include "pmpi/report.hpp"
#include "pmpi/settings.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agx::pmpi {
namespace {

Bytes allocate(std::size_t n) { return Bytes(new std::byte[n == 0 ? 1 : n]); }

std::string str(std::int64_t v) { return std::to_string(v); }

/// The chooser's algorithm for the call (core/choose.hpp): as on a communicator whose
/// node is set up, so not what a communicator's first call runs instead (the call itself
/// applies that rule, api/dispatch.hpp; a shape is recorded for the repeated path only
/// where the call ran its choice).
AlgorithmChoice selector_choice(MPI_Comm comm, const Layout& layout, const Options& options,
                                bool in_place) {
  CallFacts facts;
  facts.kind = CallKind::query;
  facts.in_place = in_place;
  return choose(context(comm).selector(), layout, options, facts).algorithm;
}

/// AGX_ALGO when it can serve the call; otherwise one warning and the automatic
/// choice with AGX_ALGO ignored.
AlgorithmChoice pick_algorithm(MPI_Comm comm, const Layout& layout, bool in_place) {
  const Options automatic{Algorithm::automatic, false};  // the choice without AGX_ALGO
  if (!algo_set()) return selector_choice(comm, layout, automatic, in_place);
  if (const auto& f = forced()) {
    try {
      return selector_choice(comm, layout, Options{f->id, true, f->radix}, in_place);
    } catch (const Error& e) {
      warn_once(comm, "cannot:" + algo_text(),
                "AGX_ALGO=" + algo_text() + " cannot serve a call (" + e.what() +
                    "); such calls use the automatic choice");
    }
  } else if (const InvalidSetting* bad = process_settings().invalid_of("AGX_ALGO")) {
    warn_once(MPI_COMM_WORLD, "invalid-algo",  // a job-wide mistake: one line per job
              "AGX_ALGO='" + bad->text + "' is not valid (" + bad->reason +
                  "); using the automatic choice");
  }
  return selector_choice(comm, layout, automatic, in_place);
}

/// Element counts and displacements of every block, checked, into `b` (its vectors
/// keep their capacity: a PreparedCall made again allocates nothing for them).
void read_blocks(const GatherCall& c, const TypeInfo& rt, int n, Blocks& b) {
  b.total_bytes = 0;
  const auto un = static_cast<std::size_t>(n);
  b.counts.resize(un);
  b.displs.resize(un);
  b.bytes.resize(un);
  if (!c.is_v && c.recvcount < 0)
    throw Error(MPI_ERR_COUNT, "agx: negative recvcount " + str(c.recvcount));
  if (c.is_v && (c.recvcounts == nullptr || c.displs == nullptr))
    throw Error(MPI_ERR_ARG, "agx: recvcounts or displs is NULL");
  for (std::size_t i = 0; i < un; ++i) {
    const auto si = static_cast<std::int64_t>(i);
    b.counts[i] = c.is_v ? c.recvcounts[i] : c.recvcount;
    b.displs[i] = c.is_v ? c.displs[i] : si * c.recvcount;
    if (b.counts[i] < 0)
      throw Error(MPI_ERR_COUNT, "agx: negative recvcounts[" + str(si) + "] " + str(b.counts[i]));
    b.bytes[i] = data_bytes(rt, b.counts[i], "receive count");
    if (__builtin_add_overflow(b.total_bytes, b.bytes[i], &b.total_bytes) ||
        b.total_bytes > static_cast<std::size_t>(PTRDIFF_MAX))
      throw Error(MPI_ERR_COUNT, "agx: total receive size overflows (recvcounts[0.." + str(si) +
                                     "] add up to more bytes than a buffer can hold)");
  }
}

/// Byte offset of block i's first element (where the datatype starts) from recvbuf.
std::int64_t element_offset(const Blocks& b, const TypeInfo& rt, std::size_t i) {
  std::int64_t offset = 0;
  if (__builtin_mul_overflow(b.displs[i], static_cast<std::int64_t>(rt.extent), &offset))
    throw Error(MPI_ERR_ARG, "agx: displacement " + str(b.displs[i]) + " overflows");
  return offset;
}

/// Address of block i's first element (where the datatype starts).
char* element_address(void* recvbuf, const Blocks& b, const TypeInfo& rt, std::size_t i) {
  return static_cast<char*>(recvbuf) + element_offset(b, rt, i);
}

/// Every non-empty receive block's data, from its displacement to the end of its last
/// element, must lie inside the address space: a displacement + count that runs past
/// it would wrap pointers. MPI_ERR_COUNT otherwise.
void check_block_ends(const void* recvbuf, const Blocks& b, const TypeInfo& rt) {
  const auto base = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(recvbuf));
  for (std::size_t i = 0; i < b.counts.size(); ++i) {
    if (b.counts[i] == 0 || rt.size == 0) continue;
    const std::int64_t first = element_offset(b, rt, i);
    const auto true_lb = static_cast<std::int64_t>(rt.true_lb);
    std::int64_t last = 0, true_ub = 0, lo = 0, hi = 0;
    const bool wraps =
        __builtin_mul_overflow(b.counts[i] - 1, static_cast<std::int64_t>(rt.extent), &last) ||
        __builtin_add_overflow(last, first, &last) ||
        __builtin_add_overflow(true_lb, static_cast<std::int64_t>(rt.true_extent), &true_ub) ||
        __builtin_add_overflow(std::min(first, last), true_lb, &lo) ||
        __builtin_add_overflow(std::max(first, last), true_ub, &hi) ||
        __builtin_add_overflow(base, lo, &lo) || __builtin_add_overflow(base, hi, &hi) || lo < 0;
    if (wraps)
      throw Error(MPI_ERR_COUNT, "agx: receive block " + str(static_cast<std::int64_t>(i)) +
                                     " (displacement " + str(b.displs[i]) + ", count " +
                                     str(b.counts[i]) + ") ends past the address space");
  }
}

/// A byte layout over `bytes` at `offsets`; uniform when it is one.
Layout make_layout(const std::vector<std::size_t>& bytes, const std::vector<std::size_t>& offsets) {
  const std::size_t b0 = bytes.empty() ? 0 : bytes[0];
  bool uniform = true;
  for (std::size_t i = 0; i < bytes.size() && uniform; ++i)
    uniform = bytes[i] == b0 && offsets[i] == i * b0;
  return uniform ? Layout::uniform(static_cast<int>(bytes.size()), b0)
                 : Layout::varying(bytes, offsets);
}

/// Offsets of the blocks in a contiguous temporary, in rank order.
void packed_offsets(const Blocks& b, std::vector<std::size_t>& offsets) {
  offsets.resize(b.bytes.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < b.bytes.size(); ++i) offsets[i] = at, at += b.bytes[i];
}

}  // namespace

PreparedCall::PreparedCall(const GatherCall& call) { prepare(call); }

void PreparedCall::prepare(const GatherCall& call) {
  c = call;
  st = TypeInfo{};
  send_tmp.reset();
  recv_tmp.reset();
  int n = 0, rank = 0;
  check_mpi(PMPI_Comm_size(c.comm, &n), "MPI_Comm_size");
  check_mpi(PMPI_Comm_rank(c.comm, &rank), "MPI_Comm_rank");
  me = static_cast<std::size_t>(rank);
  user_in_place = c.sendbuf == MPI_IN_PLACE;
  bool in_place = user_in_place;

  rt = describe_type(c.recvtype);
  read_blocks(c, rt, n, b);
  if (c.recvbuf == nullptr && rt.true_lb == 0 && b.total_bytes > 0)
    throw Error(MPI_ERR_BUFFER, "agx: receive buffer is NULL with a non-zero count");
  check_block_ends(c.recvbuf, b, rt);

  const char* send_data = nullptr;  // contiguous send bytes, when not packed
  if (!in_place) {
    st = describe_type(c.sendtype);
    if (c.sendcount < 0) throw Error(MPI_ERR_COUNT, "agx: negative sendcount " + str(c.sendcount));
    const std::size_t send_bytes = data_bytes(st, c.sendcount, "sendcount");
    if (send_bytes != b.bytes[me])
      throw Error(send_bytes > b.bytes[me] ? MPI_ERR_TRUNCATE : MPI_ERR_COUNT,
                  "agx: rank " + str(rank) + " sends " + str(static_cast<std::int64_t>(send_bytes)) +
                      " bytes but its receive block holds " +
                      str(static_cast<std::int64_t>(b.bytes[me])));
    if (c.sendbuf == nullptr && st.true_lb == 0 && send_bytes > 0)
      throw Error(MPI_ERR_BUFFER, "agx: send buffer is NULL with a non-zero count");
    if (is_contiguous(st, c.sendcount)) send_data = static_cast<const char*>(c.sendbuf) + st.true_lb;
  }

  recv_direct = true;
  for (std::size_t i = 0; i < b.counts.size() && recv_direct; ++i)
    recv_direct = is_contiguous(rt, b.counts[i]);

  // Device buffers go through agx's device path (lib/cuda) when both sides are
  // contiguous; packing device memory on the host is not supported.
  if ((!recv_direct || (!in_place && send_data == nullptr)) &&
      (cuda::is_device_memory(c.recvbuf) || (!in_place && cuda::is_device_memory(c.sendbuf))))
    throw Error(MPI_ERR_TYPE, "agx: device buffers need contiguous datatypes");

  if (!in_place && send_data == nullptr) {  // non-contiguous send: packed by stage_in()
    send_tmp = allocate(b.bytes[me]);
    send_data = reinterpret_cast<const char*>(send_tmp.get());
  }

  void* recv_base = nullptr;
  if (recv_direct) {
    // Where each block starts, twice over (no table of addresses: nothing allocated).
    const auto start = [&](std::size_t i) { return element_address(c.recvbuf, b, rt, i) + rt.true_lb; };
    char* lowest = nullptr;
    for (std::size_t i = 0; i < b.bytes.size(); ++i)
      if (char* at = start(i); b.bytes[i] > 0 && (lowest == nullptr || at < lowest)) lowest = at;
    if (lowest == nullptr) lowest = static_cast<char*>(c.recvbuf);
    offsets.resize(b.bytes.size());
    for (std::size_t i = 0; i < b.bytes.size(); ++i)
      offsets[i] = b.bytes[i] > 0 ? static_cast<std::size_t>(start(i) - lowest) : 0;
    recv_base = lowest;
    // A send buffer inside the receive buffer is erroneous MPI (only MPI_IN_PLACE may
    // alias). The habit MPI_Allgather(buf, ..., buf, ...) makes rank 0's send data its
    // own block and every other rank's overlap block 0: all of them refuse it, none
    // treats it as in place, so all ranks return the same class and none waits for the
    // others. An empty send counts by its address.
    if (!in_place && send_tmp == nullptr) {
      const std::size_t send_bytes = b.bytes[me];
      for (std::size_t i = 0; i < b.bytes.size(); ++i)
        if (ranges_overlap(send_data, send_bytes == 0 ? 1 : send_bytes, start(i), b.bytes[i]))
          throw Error(MPI_ERR_BUFFER, "agx: the send buffer overlaps receive block " +
                                          str(static_cast<std::int64_t>(i)) +
                                          " (send and receive buffers must not alias; use "
                                          "MPI_IN_PLACE)");
    }
  } else {
    packed_offsets(b, offsets);
    recv_tmp = allocate(b.total_bytes);
    recv_base = recv_tmp.get();
  }
  layout = make_layout(b.bytes, offsets);
  buffers = Buffers{in_place ? nullptr : send_data, recv_base, in_place};
}

void PreparedCall::stage_in() const {
  if (send_tmp) pack(c.sendbuf, c.sendcount, st, send_tmp.get(), c.comm);
  if (recv_tmp && user_in_place)  // the own block is in the user's buffer: bring it in
    pack(element_address(c.recvbuf, b, rt, me), b.counts[me], rt, recv_tmp.get() + offsets[me],
         c.comm);
}

void PreparedCall::stage_out() const {
  if (!recv_tmp) return;
  for (std::size_t i = 0; i < b.counts.size(); ++i) {
    if (user_in_place && i == me) continue;
    unpack(recv_tmp.get() + offsets[i], element_address(c.recvbuf, b, rt, i), b.counts[i], rt,
           c.comm);
  }
}

AlgorithmChoice pick_algorithm(const PreparedCall& p) {
  return pick_algorithm(p.c.comm, p.layout, p.buffers.in_place);
}

Options pick_nonblocking_options(const PreparedCall& p) {
  // A communicator with no context yet: the call waits for a set-up that waits for no
  // rank (api/context.hpp), and the choice is made once it is done; AGX_ALGO goes with it
  // (where it cannot serve the call, the call falls back to the automatic choice there).
  if (CommContext::find(p.c.comm) == nullptr) {
    if (const auto& f = forced()) return Options{f->id, true, f->radix};
    return Options{Algorithm::automatic, false};
  }
  const AlgorithmChoice a = pick_algorithm(p);  // AGX_ALGO when it can serve (else one warning)
  if (forced() && a == *forced()) return Options{a.id, true, a.radix};
  return Options{Algorithm::automatic, false};  // lets libagx pick a schedule that runs in pieces
}

namespace {

/// AGX_COMPRESS's encode options when the call qualifies (compression on, a block of at
/// least AGX_COMPRESS_MIN_BYTES); nullopt otherwise. The same on every rank: the settings
/// and the counts agree (MPI requires the same recvcounts on every rank).
std::optional<EncodeOptions> compress_options(const PreparedCall& p) {
  const Settings& s = settings();
  check_config();  // an unreadable AGX_COMPRESS(_MIN_BYTES) is MPI_ERR_ARG (core/settings.hpp)
  if (s.compress == Lossless::off) return std::nullopt;
  const EncodeOptions e{.lossless = s.compress, .min_bytes = s.compress_min_bytes};
  const int n = p.layout.nranks();
  std::size_t largest = 0;
  for (int b = 0; b < n && (b == 0 || !p.layout.is_uniform()); ++b)
    largest = std::max(largest, p.layout.bytes(b));
  if (n == 0 || largest < e.min_bytes) return std::nullopt;
  return e;
}

/// AGX_COMPRESS (docs/fused.md): a blocking MPI_Allgather or MPI_Allgatherv of host
/// blocks, the largest of at least the encoded all-gather's min_bytes, runs as a lossless
/// encoded all-gather, which compresses each block of at least min_bytes where its rule
/// says (auto) or always (lz4, zstd). The data arrive exactly, into the receive regions
/// only. Every rank takes the same way: compress_options agrees, and one allreduce
/// agrees on memory kinds.
bool gather_compressed(const GatherCall& c, const PreparedCall& p, const AlgorithmChoice& a,
                       Algorithm& ran) {
  const std::optional<EncodeOptions> e = compress_options(p);
  if (!e) return false;
  int device = cuda::is_device_memory(p.buffers.recv) ||
               (!p.buffers.in_place && cuda::is_device_memory(p.buffers.send));
  check_mpi(PMPI_Allreduce(MPI_IN_PLACE, &device, 1, MPI_INT, MPI_MAX, c.comm), "MPI_Allreduce");
  if (device) return false;
  const Options options{a.id, true, a.radix};
  if (p.layout.is_uniform()) {
    ran = encoded_allgather_bytes(c.comm, p.buffers.in_place ? nullptr : p.buffers.send,
                                  p.buffers.recv, p.layout.bytes(0), 1, ElementKind::bytes, *e,
                                  options)
              .algorithm;
  } else {
    ran = encoded_allgatherv_bytes(c.comm, p.buffers, p.b.bytes, p.offsets, 1, ElementKind::bytes,
                                   *e, options)
              .algorithm;
  }
  record_encoded();
  return true;
}

int gather(const GatherCall& c) {
  const bool timed = settings().summary;  // the clock only where the summary reads it
  const double t0 = timed ? PMPI_Wtime() : 0.0;
  // First thing, before any check that could fail on some ranks only: the collective
  // set-up that nonblocking calls on this communicator rely on (ready_for_nonblocking).
  context(c.comm);
  const PreparedCall p(c);
  p.stage_in();
  const AlgorithmChoice a = pick_algorithm(p);
  Algorithm ran = Algorithm::automatic;
  // AGX_ALGO goes in forced; the automatic choice goes in as such, so that libagx's
  // chooser applies its automatic rules (core/choose.hpp: the first-call rule, direct
  // write into receive buffers in shared regions).
  const Options options = forced() && a == *forced()
                              ? Options{a.id, true, a.radix}
                              : Options{Algorithm::automatic, false};
  CallChoice choice;
  AlgorithmChoice ran_choice;  // what ran, with its radix
  bool repeatable = false;  // the next call of this shape may take fast_call.cpp's path
  if (gather_compressed(c, p, a, ran)) {  // a compressed call is never repeated uncompressed
    ran_choice = what_ran(ran, a);  // (the encoded all-gather ran `a` forced)
  } else {
    ran = blocking_call(c.comm, p.buffers, p.layout, options, &choice);
    ran_choice = what_ran(ran, choice.algorithm, choice.rival.algorithm);
    // Not after a call the first-call rule deferred, nor where the device path ran
    // another algorithm.
    repeatable = !choice.deferred && (ran == choice.algorithm.id ||
                                      (choice.try_direct_write && ran == Algorithm::shared_memory));
  }
  p.stage_out();
  record_call(ran_choice, p.b.total_bytes, timed ? PMPI_Wtime() - t0 : 0.0);
  announce(c.comm, c.function, ran_choice, p.b.total_bytes);
  if (repeatable) record_shape(p, choice);
  return MPI_SUCCESS;
}

// Set while this thread runs agx code. libagx itself calls MPI (lib/hier's topology
// discovery calls MPI_Allgather, the executor MPI_Waitall): those calls go to MPI.
// Initial-exec like the repeated path's shape (fast_call.cpp): a move, no call.
AGX_FAST_TLS thread_local bool inside = false;

bool mpi_running() {
  int initialized = 0, finalized = 0;
  return PMPI_Initialized(&initialized) == MPI_SUCCESS && initialized &&
         PMPI_Finalized(&finalized) == MPI_SUCCESS && !finalized;
}

}  // namespace

std::optional<EncodedRequest> start_compressed(const PreparedCall& p, const Options& options) {
  const std::optional<EncodeOptions> e = compress_options(p);
  if (!e) return std::nullopt;
  // Nothing here may wait for the other ranks (ready_for_nonblocking): the memory kinds
  // must be known to be host on every rank without the blocking call's allreduce, and
  // the compression rule must be decided without agreeing on the compressor's speed.
  // A communicator whose set-up has not ended (in flight or not begun): uncompressed.
  CommContext* ctx = CommContext::find(p.c.comm);
  if (ctx == nullptr || !cuda::host_only(*ctx) || !codec::packer_known_locally(p.c.comm, *e))
    return std::nullopt;
  EncodedRequest r =
      p.layout.is_uniform()
          ? start_encoded_allgather_bytes(p.c.comm, p.buffers.in_place ? nullptr : p.buffers.send,
                                          p.buffers.recv, p.layout.bytes(0), 1,
                                          ElementKind::bytes, *e, options)
          : start_encoded_allgatherv_bytes(p.c.comm, p.buffers, p.b.bytes, p.offsets, 1,
                                           ElementKind::bytes, *e, options);
  record_encoded();
  return r;
}

InsideAgx::InsideAgx() : was_inside_(inside) { inside = true; }
InsideAgx::~InsideAgx() { inside = was_inside_; }
bool inside_agx() { return inside; }

bool agx_serves(MPI_Comm comm, const char* function) {
  if (inside) return false;  // agx's own use of MPI: not a user call, not counted
  if (settings().disabled) {  // untouched: no MPI call of ours unless verbose
    record_passthrough();
    if (verbose() && comm != MPI_COMM_NULL && mpi_running())
      announce_passthrough(comm, function, "AGX_DISABLE is set");
    return false;
  }
  int inter = 0;
  if (!mpi_running() || comm == MPI_COMM_NULL ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
    record_passthrough();  // erroneous: the MPI library reports it
    return false;
  }
  if (!inter) return true;
  record_passthrough();
  announce_passthrough(comm, function, "inter-communicator");
  return false;
}

bool ready_for_nonblocking(MPI_Comm comm, const char* function) {
  const InsideAgx guard;
  bool ready = false;
  try {
    // Set up (by a blocking call, or a nonblocking set-up that ended), or a set-up that
    // waits for no rank may begin or is in flight (api/context.hpp, SetupInFlight).
    ready = CommContext::find(comm) != nullptr || nonblocking_set_up_allowed() ||
            set_up_in_flight(comm, false) != nullptr;
  } catch (...) {  // the MPI library reports what is wrong with comm
  }
  if (ready) return true;
  record_passthrough();
  announce_passthrough(comm, function,
                       "no blocking all-gather on this communicator yet, and a set-up that "
                       "waits for no rank is off here (an attribute key with a copy callback, "
                       "the Fortran bindings loaded, AGX_CHECK or AGX_NODE_DETECT=mpi)");
  return false;
}

int run_gather(const GatherCall& call) noexcept {
  const InsideAgx guard;
  return guarded(call.comm, call.function, [&] { return gather(call); });
}

}  // namespace agx::pmpi
