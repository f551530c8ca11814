// A communicator's set-up exchange (context.hpp) and the checks of every byte-level call.

#include "api/context.hpp"

#include <agx/error.hpp>

#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/select.hpp"
#include "core/tuning.hpp"
#include "hier/hier.hpp"
#include "hier/hier_context.hpp"
#include "hier/topology.hpp"

#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace agx {
namespace {

// The tuning text this process last agreed on with a communicator (empty: none yet).
std::mutex held_mutex;
std::string held_text;

// What this process, as rank 0 of a communicator, gives it: empty without
// AGX_TUNING_FILE (every rank then takes the built-in defaults); the text it already
// agreed on with an earlier communicator, so that a process reads and parses the
// tuning once however many communicators it leads (tuning.hpp); else the file's text,
// read once; "!message" when the file cannot be used.
std::string own_tuning_text() {
  if (config().tuning_file.empty()) return std::string();
  {
    std::lock_guard lock(held_mutex);
    if (!held_text.empty()) return held_text;
  }
  try {
    load_tuning();  // parsed here, so that a malformed file fails on rank 0 first
    return tuning_file_text();
  } catch (const Error& e) {
    return std::string("!") + e.what();
  }
}

// The tuning of rank 0 (its text: `own` there), on every rank (a file that only some
// ranks can read, or that differs between nodes, must not split the choice).
Tuning agreed_tuning(MPI_Comm comm, int rank, std::uint64_t length, const std::string& own) {
  if (length == 0) return Tuning{};
  std::string text = rank == 0 ? own : std::string(length, '\0');
  check_mpi(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0, comm), "MPI_Bcast");
  if (text[0] == '!') throw Error(MPI_ERR_FILE, text.substr(1));
  // The same text on every communicator of a job: parsed once per process.
  Tuning t = parse_tuning_once(text, !config().tuning_file.empty() ? config().tuning_file : "rank 0's tuning file");
  std::lock_guard lock(held_mutex);
  held_text = std::move(text);
  return t;
}

// Frees the set-up's communicators unless the context took them.
struct Comms {
  MPI_Comm comm = MPI_COMM_NULL, shared = MPI_COMM_NULL;
  ~Comms() {
    if (shared != MPI_COMM_NULL) MPI_Comm_free(&shared);
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

CommContext& set_up(MPI_Comm user_comm) {
  Comms c;
  // 1. The private communicator: the same group and order. Not MPI_Comm_dup: that
  // copies the user's attributes, running their copy callbacks (which may refuse, or
  // count references) and later their delete callbacks a second time; MPI_Comm_idup and
  // MPI_Comm_dup_with_info do too. MPI_Comm_create copies none.
  MPI_Group group = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(user_comm, &group), "MPI_Comm_group");
  const int created = MPI_Comm_create(user_comm, group, &c.comm);
  MPI_Group_free(&group);
  check_mpi(created, "MPI_Comm_create");
  // agx reports failures itself; its private communicator must never abort.
  check_mpi(MPI_Comm_set_errhandler(c.comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(c.comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(c.comm, &size), "MPI_Comm_size");

  // 2. Only under AGX_NODE_DETECT=mpi: the MPI library's shared-memory node (else the
  // records name each rank's machine; topology.hpp).
  c.shared = hier::shared_comm_if_asked(c.comm);

  // 3. One record per rank. A malformed virtual-node setting still joins the exchange
  // (the other ranks are in it), then fails.
  SetupRecord mine;
  std::string setting;
  std::string bad_setting;
  try {
    mine.node = hier::own_record(c.comm, c.shared, setting);
  } catch (const Error& e) {
    bad_setting = e.what();
  }
  const std::string tuning_text = rank == 0 ? own_tuning_text() : std::string();
  mine.tuning_bytes = tuning_text.size();
  mine.device = cuda::own_setup_word();
  std::vector<SetupRecord> all(static_cast<std::size_t>(size));
  // PMPI_ on purpose: under the interposer, MPI_Allgather would re-enter agx.
  check_mpi(PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, c.comm),
            "MPI_Allgather");
  // 4. The tuning, only where rank 0 has a file.
  Tuning tuning = agreed_tuning(c.comm, rank, all[0].tuning_bytes, tuning_text);
  if (!bad_setting.empty()) throw Error(MPI_ERR_ARG, bad_setting);

  std::vector<hier::NodeRecord> nodes(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) nodes[r] = all[r].node;
  auto node = std::make_unique<hier::HierContext>(hier::topology_from(nodes, rank, setting),
                                                  c.comm, c.shared);
  c.shared = MPI_COMM_NULL;  // the node state owns it now
  auto selector = std::make_unique<Selector>(Placement(node->topo.node_of), std::move(tuning),
                                             hier::stage_params(*node));
  const MPI_Comm comm = c.comm;
  c.comm = MPI_COMM_NULL;  // the context owns it from here, and the selector
  CommContext& ctx = CommContext::attach(user_comm, comm, selector.release(), std::move(node));
  std::vector<cuda::SetupWord> words(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) words[r] = all[r].device;
  cuda::adopt_setup_words(ctx, words);
  return ctx;
}

}  // namespace

CommContext* existing_context(MPI_Comm user_comm) {
  if (user_comm == MPI_COMM_NULL) throw Error(MPI_ERR_COMM, "agx: communicator is MPI_COMM_NULL");
  if (CommContext* ctx = CommContext::find(user_comm)) return ctx;
  int inter = 0;
  check_mpi(MPI_Comm_test_inter(user_comm, &inter), "MPI_Comm_test_inter");
  if (inter) throw Error(MPI_ERR_COMM, "agx: inter-communicators are not supported");
  return nullptr;
}

CommContext& context(MPI_Comm user_comm) {
  if (CommContext* ctx = existing_context(user_comm)) return *ctx;
  return set_up(user_comm);
}

CommContext& checked_context(MPI_Comm comm, const Buffers& buffers, const Layout& layout) {
  CommContext& ctx = context(comm);
  check_call(ctx.size(), ctx.rank(), buffers, layout);
  return ctx;
}

void check_call(int size, int rank, const Buffers& buffers, const Layout& layout) {
  if (layout.nranks() != size)
    throw Error(MPI_ERR_ARG, "agx: layout has " + std::to_string(layout.nranks()) +
                                 " blocks for a communicator of " + std::to_string(size) +
                                 " ranks");
  // Every block must end, and all blocks together must fit, within what a pointer
  // difference can hold: sizes that wrap would move bytes to the wrong places.
  constexpr std::size_t limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  bool any_bytes = false;
  std::size_t total = 0;
  if (layout.is_uniform()) {  // one size: the last block's end is the total
    const std::size_t bytes = layout.bytes(0), n = static_cast<std::size_t>(layout.nranks());
    if (__builtin_mul_overflow(bytes, n, &total) || total > limit)
      throw Error(MPI_ERR_COUNT, "agx: " + std::to_string(n) + " blocks of " + std::to_string(bytes) +
                                     " bytes add up to more bytes than a buffer can hold");
    any_bytes = total > 0;
  }
  for (int b = 0; b < layout.nranks() && !layout.is_uniform(); ++b) {
    const std::size_t bytes = layout.bytes(b);
    any_bytes = any_bytes || bytes > 0;
    std::size_t start = 0, end = 0;  // a uniform layout's offset is bytes * b: checked here
    const bool start_wraps = layout.is_uniform()
                                 ? __builtin_mul_overflow(bytes, static_cast<std::size_t>(b), &start)
                                 : (start = layout.offset(b), false);
    if (start_wraps || __builtin_add_overflow(start, bytes, &end) || end > limit)
      throw Error(MPI_ERR_COUNT, "agx: block " + std::to_string(b) + " (" + std::to_string(bytes) +
                                     " bytes) ends past the largest buffer size");
    if (__builtin_add_overflow(total, bytes, &total) || total > limit)
      throw Error(MPI_ERR_COUNT, "agx: the blocks of ranks 0.." + std::to_string(b) +
                                     " add up to more bytes than a buffer can hold");
  }
  check_buffers(buffers, any_bytes, layout.bytes(rank));
}

void check_buffers(const Buffers& buffers, bool any_bytes, std::size_t own_bytes) {
  if (any_bytes && buffers.recv == nullptr)
    throw Error(MPI_ERR_BUFFER, "agx: receive buffer is null");
  if (!buffers.in_place && buffers.send == nullptr && own_bytes > 0)
    throw Error(MPI_ERR_BUFFER, "agx: send buffer is null");
}

}  // namespace agx
