// A communicator's set-up exchange (context.hpp) and the checks of every byte-level call.

#include "api/context.hpp"

#include <agx/error.hpp>

#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/select.hpp"
#include "core/tuning.hpp"
#include "hier/hier.hpp"
#include "hier/hier_context.hpp"
#include "hier/settings.hpp"
#include "hier/topology.hpp"
#include "core/nonblocking.hpp"

#include <atomic>
#include <limits>
#include <map>
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

// Rank 0's tuning text as every rank received it: parsed once per process.
Tuning adopt_tuning(std::string text) {
  if (text[0] == '!') throw Error(MPI_ERR_FILE, text.substr(1));
  // The same text on every communicator of a job: parsed once per process.
  Tuning t = parse_tuning_once(text, !config().tuning_file.empty() ? config().tuning_file : "rank 0's tuning file");
  std::lock_guard lock(held_mutex);
  held_text = std::move(text);
  return t;
}

// The tuning of rank 0 (its text: `own` there), on every rank (a file that only some
// ranks can read, or that differs between nodes, must not split the choice).
Tuning agreed_tuning(MPI_Comm comm, int rank, std::uint64_t length, const std::string& own) {
  if (length == 0) return Tuning{};
  std::string text = rank == 0 ? own : std::string(length, '\0');
  check_mpi(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0, comm), "MPI_Bcast");
  return adopt_tuning(std::move(text));
}

// Frees the set-up's communicators unless the context took them.
struct Comms {
  MPI_Comm comm = MPI_COMM_NULL, shared = MPI_COMM_NULL;
  ~Comms() {
    if (shared != MPI_COMM_NULL) MPI_Comm_free(&shared);
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

// The set-up's local end, the same on every rank: the context from every rank's record
// and the agreed tuning; attached to `user_comm`, or, where the user freed it while a
// nonblocking set-up ran (null), owned by the calls that wait for it only.
std::shared_ptr<CommContext> build_context(MPI_Comm user_comm, Comms& c, int rank,
                                           const std::vector<SetupRecord>& all, Tuning tuning,
                                           const std::string& setting) {
  std::vector<hier::NodeRecord> nodes(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) nodes[r] = all[r].node;
  auto node = std::make_unique<hier::HierContext>(hier::topology_from(nodes, rank, setting),
                                                  c.comm, c.shared);
  c.shared = MPI_COMM_NULL;  // the node state owns it now
  auto selector = std::make_unique<Selector>(Placement(node->topo.node_of), std::move(tuning),
                                             hier::stage_params(*node));
  const MPI_Comm comm = c.comm;
  c.comm = MPI_COMM_NULL;  // the context owns it from here, and the selector
  std::shared_ptr<CommContext> ctx =
      user_comm != MPI_COMM_NULL
          ? CommContext::attach(user_comm, comm, selector.release(), std::move(node)).share()
          : CommContext::detached(comm, selector.release(), std::move(node));
  std::vector<cuda::SetupWord> words(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) words[r] = all[r].device;
  cuda::adopt_setup_words(*ctx, words);
  return ctx;
}

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

  return *build_context(user_comm, c, rank, all, std::move(tuning), setting);
}

// Set-ups in flight, by user communicator (SetupInFlight); their attribute on the user's
// communicator tells them when it is freed.
std::mutex flight_mutex;
std::map<MPI_Comm, std::shared_ptr<SetupInFlight>> in_flight;
std::atomic<bool> nonblocking_allowed{false};
int flight_keyval = MPI_KEYVAL_INVALID;
thread_local bool detaching = false;  // (deleting the attribute ourselves: no orphan)

int delete_in_flight(MPI_Comm, int, void* attr, void*) {
  if (!detaching) static_cast<SetupInFlight*>(attr)->orphan();
  return MPI_SUCCESS;
}

int ensure_flight_keyval() {
  static const int keyval = [] {
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_in_flight, &flight_keyval, nullptr),
              "MPI_Comm_create_keyval");
    return flight_keyval;
  }();
  return keyval;
}

// Forgets `user`'s entry and its attribute (the set-up ended, made or failed).
void forget_in_flight(MPI_Comm user) {
  if (user == MPI_COMM_NULL) return;
  {
    std::lock_guard lock(flight_mutex);
    in_flight.erase(user);
  }
  detaching = true;
  MPI_Comm_delete_attr(user, flight_keyval);
  detaching = false;
}

}  // namespace

SetupInFlight::SetupInFlight(MPI_Comm user_comm, int rank, int size)
    : user_(user_comm), rank_(rank), size_(size) {
  const int keyval = ensure_flight_keyval();
  // PMPI_ on purpose, as in set_up: nothing here may re-enter the interposer.
  check_mpi(PMPI_Comm_idup(user_comm, &comm_, &request_), "MPI_Comm_idup");
  check_mpi(MPI_Comm_set_attr(user_comm, keyval, this), "MPI_Comm_set_attr");
}

SetupInFlight::~SetupInFlight() {
  // A set-up whose every call went away before it ended keeps its requests (MPI frees
  // no pending collective's request): left to the MPI library, as a failed one's are.
  if (stage_ == 3 && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void SetupInFlight::orphan() {
  std::lock_guard lock(mutex_);
  // MPI_Comm_idup must end before its parent goes (Open MPI's reads the parent while it
  // runs): MPI_Comm_free is collective, and every rank began the idup before it. (Under
  // MPICH the free itself waits for the idup, and this runs inside advance()'s test.)
  if (stage_ == 0 && !failure_ && !testing_) {
    try {
      check_mpi(PMPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
      step();
    } catch (...) {
      failure_ = std::current_exception();
    }
  }
  {
    std::lock_guard flight(flight_mutex);
    in_flight.erase(user_);
  }
  user_ = MPI_COMM_NULL;
}

void SetupInFlight::on_ready(std::function<void(CommContext&)> launch) {
  std::shared_ptr<CommContext> ctx;
  {
    std::lock_guard lock(mutex_);
    if (ctx_ == nullptr || launching_) {
      waiting_.push_back(std::move(launch));
      return;
    }
    ctx = ctx_;
  }
  launch(*ctx);
}

void SetupInFlight::step() {
  switch (stage_) {
    case 0: {  // the private communicator is made: every rank's record
      check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      try {
        mine_.node = hier::own_record(comm_, MPI_COMM_NULL, setting_);
      } catch (const Error& e) {  // (joins the exchange all the same, then fails)
        bad_setting_ = e.what();
      }
      tuning_own_ = rank_ == 0 ? own_tuning_text() : std::string();
      mine_.tuning_bytes = tuning_own_.size();
      mine_.device = cuda::own_setup_word();
      all_.resize(static_cast<std::size_t>(size_));
      check_mpi(PMPI_Iallgather(&mine_, sizeof mine_, MPI_BYTE, all_.data(), sizeof mine_, MPI_BYTE,
                                comm_, &request_),
                "MPI_Iallgather");
      stage_ = 1;
      return;
    }
    case 1: {  // the records are in: rank 0's tuning text, where it has one
      const std::uint64_t length = all_[0].tuning_bytes;
      stage_ = 3;
      if (length == 0) return;
      tuning_text_ = rank_ == 0 ? tuning_own_ : std::string(length, '\0');
      check_mpi(PMPI_Ibcast(tuning_text_.data(), static_cast<int>(length), MPI_CHAR, 0, comm_, &request_),
                "MPI_Ibcast");
      stage_ = 2;
      return;
    }
    default:  // (2) rank 0's tuning text is in
      stage_ = 3;
  }
}

bool SetupInFlight::advance() {
  std::unique_lock lock(mutex_);
  if (failure_) std::rethrow_exception(failure_);
  if (ctx_ != nullptr) return true;
  try {
    while (stage_ < 3) {
      int done = 0;
      testing_ = true;
      const int rc = PMPI_Test(&request_, &done, MPI_STATUS_IGNORE);
      testing_ = false;
      check_mpi(rc, "MPI_Test");
      if (!done) return false;
      step();
    }
    Tuning tuning = tuning_text_.empty() ? Tuning{} : adopt_tuning(tuning_text_);
    if (!bad_setting_.empty()) throw Error(MPI_ERR_ARG, bad_setting_);
    const MPI_Comm user = user_;
    forget_in_flight(user);  // (before the context's own attribute goes on)
    Comms c;
    c.comm = comm_;
    comm_ = MPI_COMM_NULL;
    ctx_ = build_context(user, c, rank_, all_, std::move(tuning), setting_);
  } catch (...) {
    failure_ = std::current_exception();
    forget_in_flight(user_);
    throw;
  }
  // The calls that waited, in the order they were made (every rank starts them alike),
  // outside the lock: a start may advance the other calls, which ask this set-up again
  // (and find their own launch still to come: Deferred waits for it). Calls registered
  // meanwhile queue behind them.
  launching_ = true;
  const std::shared_ptr<CommContext> ctx = ctx_;
  for (std::size_t i = 0; i < waiting_.size(); ++i) {
    std::function<void(CommContext&)> launch = std::move(waiting_[i]);
    lock.unlock();
    launch(*ctx);
    lock.lock();
  }
  waiting_.clear();
  launching_ = false;
  return true;
}

bool nonblocking_set_up_allowed() {
  return nonblocking_allowed.load(std::memory_order_relaxed) && !config().check &&
         !hier::settings().node_detect_mpi;
}

void allow_nonblocking_set_up(bool allow) { nonblocking_allowed.store(allow, std::memory_order_relaxed); }

std::shared_ptr<SetupInFlight> set_up_in_flight(MPI_Comm user_comm, bool begin) {
  {
    std::lock_guard lock(flight_mutex);
    if (in_flight.empty() && !begin) return nullptr;
    if (auto it = in_flight.find(user_comm); it != in_flight.end()) return it->second;
  }
  if (!begin || !nonblocking_set_up_allowed() || CommContext::find(user_comm) != nullptr)
    return nullptr;
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(user_comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(user_comm, &size), "MPI_Comm_size");
  auto s = std::make_shared<SetupInFlight>(user_comm, rank, size);
  std::lock_guard lock(flight_mutex);
  in_flight[user_comm] = s;
  return s;
}

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
  // A set-up in flight (begun by a nonblocking start): a blocking call waits for it, as
  // every rank has begun it (collective order), and finds the context attached.
  if (std::shared_ptr<SetupInFlight> flight = set_up_in_flight(user_comm, false)) {
    progress_until([&] { return flight->advance(); });
    if (CommContext* ctx = existing_context(user_comm)) return *ctx;
  }
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
