#include "core/executor.hpp"

#include "core/comm_context.hpp"
#include "core/copy.hpp"
#include "core/mpi_check.hpp"
#include "core/spin.hpp"

#include <agx/error.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <utility>
#include <set>
#include <string>

namespace agx {
namespace {

std::mutex abandoned_mutex;
std::set<MPI_Comm> abandoned;  // communicators with an abandoned round (free_comm)

}  // namespace

// The calls that make a message (one signature each for sends and receives).
struct MessageCalls {
  decltype(&MPI_Isend) send;
  decltype(&MPI_Irecv) recv;
  const char* send_name;
  const char* recv_name;
};

namespace {

constexpr MessageCalls immediate_calls{&MPI_Isend, &MPI_Irecv, "MPI_Isend", "MPI_Irecv"};
constexpr MessageCalls persistent_calls{&MPI_Send_init, &MPI_Recv_init, "MPI_Send_init",
                                        "MPI_Recv_init"};

}  // namespace

void mark_abandoned(MPI_Comm comm) noexcept {
  try {
    std::lock_guard lock(abandoned_mutex);
    abandoned.insert(comm);
  } catch (...) {  // out of memory: the communicator is freed as usual
  }
}

void free_comm(MPI_Comm& comm) noexcept {
  if (comm == MPI_COMM_NULL) return;
  {
    std::lock_guard lock(abandoned_mutex);
    if (abandoned.erase(comm) > 0) {
      comm = MPI_COMM_NULL;  // kept allocated on purpose until MPI_Finalize
      return;
    }
  }
  MPI_Comm_free(&comm);
}

Execution::Execution(const Schedule& schedule, const Buffers& buffers, const Layout& layout,
                     MPI_Comm comm, int tag, std::size_t max_message_bytes, const Checks& checks)
    : schedule_(schedule),
      buffers_(buffers),
      layout_(layout),
      comm_(comm),
      tag_(tag),
      max_message_bytes_(max_message_bytes),
      checks_(checks),
      timeout_(timeout_seconds()),
      calls_(&immediate_calls) {
  if (RoundChecks::needed(checks_, schedule_.rank))
    round_checks_.emplace(schedule_, buffers_, layout_, checks_);
}

Execution::Execution(const Schedule& schedule, const Buffers& buffers, const Layout& layout,
                     MPI_Comm comm, int tag, std::size_t max_message_bytes, NodeSegment& node,
                     const Checks& checks)
    : Execution(schedule, buffers, layout, comm, tag, max_message_bytes, checks) {
  node_ = &node;
  round_checks_.reset();  // per-round checks do not apply to node schedules (executor.hpp)
  // How many segment sends wait for their blocks depends on timing: room for all of a
  // round's, so that a rebound execution (rebind) never allocates for them.
  std::size_t sends = 0;
  bool messages = false;
  for (const Round& round : schedule_.rounds) {
    sends = std::max(sends, round.sends.size());
    messages = messages || !round.sends.empty() || !round.recvs.empty();
    // Which flags go with a copy of their round (a signal with a put, a wait with a get),
    // found once: the rounds ask per op (put_round, signal_round, gets_done).
    node_at_.push_back(alone_.size());
    for (const NodeOp& op : round.node) alone_.push_back(paired(round, op) ? 0 : 1);
  }
  deferred_.reserve(sends);
  message_free_ = !messages;
}

void Execution::rebind(const Buffers& buffers, const Layout& layout, int tag, NodeSegment& node) {
  if (node_ == nullptr || (started_ && round_ < schedule_.rounds.size()) || failed_)
    throw Error(MPI_ERR_INTERN, "agx: only a node schedule's finished execution can be rebound");
  buffers_ = buffers;
  layout_ = layout;
  tag_ = tag;
  node_ = &node;
}

Execution::~Execution() {
  abandon();
  release_scratch();
  release_stored();
}

// The post loop, once per round, with the _init calls: each round's requests are kept.
void Execution::make_persistent(std::shared_ptr<CompiledSchedule> compiled) {
  compiled_ = std::move(compiled);
  stored_.resize(schedule_.rounds.size());
  const bool checksums = round_checks_ && round_checks_->carries_checksums();
  calls_ = &persistent_calls;
  try {
    for (round_ = 0; round_ < stored_.size(); ++round_) {
      post_transfers(schedule_.rounds[round_], checksums);
      swap_round(stored_[round_]);
    }
  } catch (...) {
    swap_round(stored_[round_]);  // freed with the rest (release_stored)
    stored_types_.swap(types_);
    calls_ = &immediate_calls;
    throw;
  }
  stored_types_.swap(types_);
  calls_ = &immediate_calls;  // for a round posted per call (post_round)
}

void Execution::start_stored() {
  StoredRound& s = stored_[round_];
  if (!s.requests.empty())
    check_mpi(MPI_Startall(static_cast<int>(s.requests.size()), s.requests.data()),
              "MPI_Startall");
  swap_round(s);
  loaded_ = &s;
}

void Execution::swap_round(StoredRound& s) noexcept {
  requests_.swap(s.requests);
  std::swap(receives_, s.receives);
  expected_.swap(s.expected);
  recv_transfers_.swap(s.recv_transfers);
  posted_.swap(s.posted);
}

void Execution::clear_round() noexcept {
  if (loaded_ != nullptr) swap_round(*std::exchange(loaded_, nullptr));
  requests_.clear();
  expected_.clear();
  recv_transfers_.clear();
  posted_.clear();
  recv_begin_.clear();
  receives_ = 0;
  for (MPI_Datatype& t : types_) MPI_Type_free(&t);
  types_.clear();
}

void Execution::release_stored() noexcept {
  if (stored_.empty()) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI has released everything already
  for (StoredRound& s : stored_)
    for (MPI_Request& r : s.requests)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  for (MPI_Datatype& t : stored_types_) MPI_Type_free(&t);
}

// On a context's private communicator, a point-to-point schedule over the caller's
// buffers runs from the context's compiled descriptors (descriptors.hpp): found in its
// cache, or compiled there now.
void Execution::use_compiled() {
  CommContext* ctx = CommContext::of_private(comm_);
  if (ctx == nullptr) return;
  compiled_ = ctx->compiled(schedule_, layout_, buffers_.in_place, max_message_bytes_);
  if (!compiled_) return;
  scratch_ = compiled_->take_scratch();  // null while another execution of it runs
  if (scratch_ != nullptr) swap_scratch();
}

void Execution::swap_scratch() {
  requests_.swap(scratch_->requests);
  expected_.swap(scratch_->expected);
  statuses_.swap(scratch_->statuses);
  recv_transfers_.swap(scratch_->recv_transfers);
  posted_.swap(scratch_->posted);
  done_indices_.swap(scratch_->done_indices);
  done_statuses_.swap(scratch_->done_statuses);
  recv_begin_.swap(scratch_->recv_begin);
}

void Execution::release_scratch() noexcept {
  if (scratch_ == nullptr) return;
  requests_.clear();
  expected_.clear();
  recv_transfers_.clear();
  posted_.clear();
  done_statuses_.clear();
  recv_begin_.clear();
  swap_scratch();  // their memory stays with the compiled schedule for the next call
  compiled_->give_back(scratch_);
  scratch_ = nullptr;
}

void Execution::use_block_pieces(const BlockPieces& blocks) {
  pieces_ = &blocks;
  round_checks_.reset();
}

// After a failed MPI call (or a stall under AGX_TIMEOUT_ACTION=error) the round's other
// requests may still be in flight, pointing into the caller's buffers. Receives are
// cancelled and completed (one already matched completes with its data, or is freed
// after a second); sends are freed, so that MPI completes them in the background (MPI
// libraries need not cancel sends, and Open MPI does not). The datatypes of the round
// are freed. Nothing is left that could write into the caller's memory once the
// exception reaches them. A peer's message of this round may still arrive: the
// communicator is marked so that it is never freed (free_comm), and the execution is
// failed (a persistent one's freed sends cannot start again). Never throws.
void Execution::abandon() noexcept {
  if (started_ && round_ < schedule_.rounds.size()) {
    mark_abandoned(comm_);
    failed_ = true;
  }
  round_ = schedule_.rounds.size();  // nothing more is posted
  if (requests_.empty() && types_.empty() && loaded_ == nullptr) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI has released everything already
  std::vector<bool> sends(requests_.size());
  for (std::size_t i = 0; i < requests_.size(); ++i) sends[i] = i >= receives_;
  agx::abandon(requests_.data(), sends);  // core/timeout.hpp (persistent ones: inactive or freed)
  clear_round();
}

void Execution::put_round(const Round& round) {
  const char* alone = alone_.data() + node_at_[round_];
  for (std::size_t i = 0; i < round.node.size(); ++i) {
    if (round.node[i].kind == NodeOp::Kind::put) {
      // Staged: the own block is on the mirror once its to_host is over (a local wait).
      if (device_ != nullptr) device_->own_needed(layout_.bytes(schedule_.rank));
      node_->put(round.node[i], buffers_, layout_, !alone[i]);
    }
    else if (round.node[i].kind == NodeOp::Kind::write) node_->write(round.node[i], buffers_, layout_, !alone[i]);
    else if (round.node[i].kind == NodeOp::Kind::expose) node_->expose(round.node[i], buffers_, layout_, !alone[i]);
  }
}

void NodeSegment::write(const NodeOp&, const Buffers&, const Layout&, bool) {
  throw Error(MPI_ERR_INTERN,
              "agx: a schedule writes into the peers' receive buffers (direct write) on node "
              "copies that cannot (only hier/direct_write.hpp's can)");
}

namespace {
[[noreturn]] void not_single_copy(const char* what) {
  throw Error(MPI_ERR_INTERN, std::string("agx: a schedule ") + what +
                                  " (single copy) on node copies that cannot (only "
                                  "hier/node_copies.hpp's SingleCopies can)");
}
}  // namespace

void NodeSegment::expose(const NodeOp&, const Buffers&, const Layout&, bool) {
  not_single_copy("exposes its own buffer");
}

bool NodeSegment::try_read(const NodeOp&, GetCursor&, const Buffers&, const Layout&) {
  not_single_copy("reads from the peers' buffers");
}

bool NodeSegment::try_release(const NodeOp&) { not_single_copy("releases its own buffer"); }

void Execution::signal_round(const Round& round) {
  const char* alone = alone_.data() + node_at_[round_];
  for (std::size_t i = 0; i < round.node.size(); ++i)
    if (round.node[i].kind == NodeOp::Kind::signal && alone[i]) node_->signal(round.node[i]);
}

void Execution::start() {
  if (message_free_ && !polling()) {
    start_local();
    return;
  }
  local_ = false;
  if (!compiled_ && node_ == nullptr && pieces_ == nullptr && stored_.empty() &&
      !schedule_.rounds.empty())
    use_compiled();
  round_ = 0;
  suspect_.clear();  // (a persistent execution's previous start)
  node_steps_ = 0;
  if (polling()) clock_.emplace(timeout_);
  started_ = true;
  try {
    if (device_ != nullptr) issue_to_host(0);  // before the own block's checksum
    if (round_checks_ && device_ != nullptr) device_->own_needed(layout_.bytes(schedule_.rank));
    if (round_checks_) round_checks_->start();
    if (!schedule_.rounds.empty()) {
      post_round();
      // A node round of puts only (a node schedule's first) is complete once posted.
      while (node_ != nullptr && round_ < schedule_.rounds.size() && requests_.empty() &&
             deferred_.empty() && cursors_.empty() && gets_done())
        end_round();
    } else if (node_ != nullptr) {
      node_->finish();
    }
  } catch (...) {
    abandon();
    throw;
  }
}

bool Execution::test() {
  if (local_) return test_local();
  try {
    if (polling() && !poll()) return false;
    while (round_ < schedule_.rounds.size()) {
      // Node operations first: a deferred send may be what the peer's receive awaits.
      const bool node_done = node_ == nullptr || (post_deferred() & gets_done());
      if (requests_.empty()) {  // a round of node operations only: no call into MPI
        if (!node_done) return false;
        end_round();
        continue;
      }
      int done = 0;
      MPI_Status* st = statuses_for(statuses_, requests_.size());
      const WorldReturnsErrors guard;
      const int rc =
          MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, st);
      if (rc == MPI_SUCCESS && !done) return false;
      // The round's requests are complete (and now null): their statuses are checked
      // once, even when node operations keep the round open for further calls.
      if (!statuses_checked_) check_received(rc, "MPI_Testall");
      else check_mpi(rc, "MPI_Testall");
      statuses_checked_ = true;
      if (!node_done) return false;
      end_round();
    }
    // After the last round: the node may still read this rank's memory (single copy).
    if (node_ != nullptr && !node_->finished()) {
      if (timeout_ > 0 && !node_moved() && clock_->stalled()) stalled();
      return false;
    }
  } catch (...) {
    abandon();
    throw;
  }
  if (truncated_) std::rethrow_exception(std::exchange(truncated_, nullptr));
  if (node_ != nullptr && node_->disagreement()) std::rethrow_exception(node_->disagreement());
  return true;
}

// Whether the node's gets copied something since the last look (AGX_TIMEOUT: progress,
// the clock restarts).
bool Execution::node_moved() {
  if (node_ == nullptr || node_->steps() == node_steps_) return false;
  node_steps_ = node_->steps();
  clock_->restart();
  return true;
}

bool Execution::post_deferred() {
  if (deferred_.empty()) return true;
  std::size_t kept = 0;
  for (const Transfer* t : deferred_) {
    if (!node_->holds(*t)) {
      deferred_[kept++] = t;
      continue;
    }
    suspect_if_disagreed(*t);
    const std::size_t before = requests_.size();
    post_transfer(true, *t, 0, false);
    open_ += requests_.size() - before;  // (AGX_TIMEOUT's count of open requests)
  }
  deferred_.resize(kept);
  if (timeout_ > 0) done_indices_.resize(requests_.size());
  return deferred_.empty();
}

// The message-free lane: a node schedule of one node (puts and gets only, no message)
// without AGX_TIMEOUT's clock or device copies needs nothing of the post loop, the request
// vectors or MPI: each round puts its blocks when it begins and polls its gets until
// they are all copied, on the same NodeSegment calls as the general loop, with the same
// end (finish(), finished(), the disagreement thrown after the last round).
void Execution::start_local() {
  local_ = true;
  started_ = true;
  round_ = 0;
  try {
    begin_local_round();
  } catch (...) {
    abandon();
    throw;
  }
}

void Execution::begin_local_round() {
  for (; round_ < schedule_.rounds.size(); ++round_) {
    const Round& round = schedule_.rounds[round_];
    std::size_t gets = 0, waits = 0;
    put_round(round);
    for (const NodeOp& op : round.node) {
      gets += op.kind == NodeOp::Kind::get || op.kind == NodeOp::Kind::read;
      waits += op.kind == NodeOp::Kind::wait || op.kind == NodeOp::Kind::release;
    }
    copy_round();
    if (gets + waits > 0) {
      cursors_.assign(gets, GetCursor{});
      return;
    }
    signal_round(round);
  }
  node_->finish();
}

bool Execution::test_local() {
  try {
    while (round_ < schedule_.rounds.size()) {
      if (!gets_done()) return false;
      signal_round(schedule_.rounds[round_]);
      ++round_;
      begin_local_round();
    }
    if (!node_->finished()) return false;
  } catch (...) {
    abandon();
    throw;
  }
  if (node_->disagreement()) std::rethrow_exception(node_->disagreement());
  return true;
}

// The round's gets and the waits no get covers (core/schedule.hpp, NodeOp).
bool Execution::gets_done() {
  const auto& ops = schedule_.rounds[round_].node;
  const char* alone = alone_.data() + node_at_[round_];
  bool all = true;
  for (std::size_t i = 0, g = 0; i < ops.size(); ++i) {
    if (ops[i].kind == NodeOp::Kind::get) {
      GetCursor& c = cursors_[g++];
      const std::size_t before = c.block;  // blocks the get has copied whole
      all = node_->try_get(ops[i], c, buffers_, layout_) && all;
      if (device_ != nullptr && c.block > before && to_device(ops[i].blocks)) device_->got(ops[i], before, c.block);
    }
    else if (ops[i].kind == NodeOp::Kind::read) all = node_->try_read(ops[i], cursors_[g++], buffers_, layout_) && all;
    else if (ops[i].kind == NodeOp::Kind::wait && alone[i]) all = node_->try_wait(ops[i]) && all;
    else if (ops[i].kind == NodeOp::Kind::release) all = node_->try_release(ops[i]) && all;
  }
  return all;
}

void Execution::wait() {
  try {
    if (node_ != nullptr) {  // gets are polled: no MPI_Waitall (test() throws the truncation)
      spin_then_yield([this] { return test(); });
      return;
    }
    if (polling()) spin_then_yield([this] { return poll(); });  // poll() reports a stall
    while (round_ < schedule_.rounds.size()) {
      MPI_Status* st = statuses_for(statuses_, requests_.size());
      const WorldReturnsErrors guard;
      check_received(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), st),
                     "MPI_Waitall");
      end_round();
    }
  } catch (...) {
    abandon();
    throw;
  }
  if (truncated_) std::rethrow_exception(std::exchange(truncated_, nullptr));
}

bool Execution::poll() {
  while (round_ < schedule_.rounds.size()) {
    const bool posted = node_ == nullptr || post_deferred();
    open_ = test_some(requests_, done_indices_, open_, *clock_, &done_statuses_);
    for (std::size_t k = 0; k < done_statuses_.size(); ++k) {  // sizes, as check_received
      const auto i = static_cast<std::size_t>(done_indices_[k]);
      if (i >= receives_) continue;
      check_size(i, done_statuses_[k]);
      if (device_ != nullptr && recv_transfers_[i] != nullptr && to_device(recv_transfers_[i]->blocks))
        device_->to_device(*recv_transfers_[i], recv_begin_[i], recv_begin_[i] + expected_[i]);
    }
    // The gets are advanced on every poll, also while messages are open: a node's copies
    // overlap the wire (AGX_TIMEOUT's polling as much as test()).
    const bool gets = node_ == nullptr || gets_done();
    if (open_ > 0 || !posted || !gets) {
      if (timeout_ > 0 && !node_moved() && clock_->stalled()) stalled();
      return false;
    }
    end_round();
    clock_->restart();
  }
  return true;
}

// A truncation (a receive longer or shorter than its message: the ranks disagree on the
// counts) does not stop this rank: it keeps its part in the remaining rounds, so that
// the ranks waiting for what it forwards are not left hanging, and the first
// truncation is thrown once the schedule is done. Any other failure throws at once.
void Execution::check_received(int rc, const char* call) {
  const std::size_t n = requests_.size();
  int error_class = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &error_class);
  const auto class_at = [&](std::size_t i) {
    int c = MPI_SUCCESS;
    if (statuses_[i].MPI_ERROR != MPI_SUCCESS) MPI_Error_class(statuses_[i].MPI_ERROR, &c);
    return c;
  };
  bool only_truncation = error_class == MPI_ERR_TRUNCATE;
  if (error_class == MPI_ERR_IN_STATUS) {
    only_truncation = true;
    for (std::size_t i = 0; i < n; ++i) {
      const int c = class_at(i);
      only_truncation = only_truncation && (c == MPI_SUCCESS || c == MPI_ERR_TRUNCATE ||
                                            c == MPI_ERR_PENDING);
    }
  }
  if (rc != MPI_SUCCESS && !only_truncation) check_statuses(rc, statuses_.data(), n, call);
  // After one request failed, MPI leaves those not yet complete pending (MPI_ERR_PENDING):
  // complete them, so that this rank's sends of the round still reach its peers.
  for (std::size_t i = 0; error_class == MPI_ERR_IN_STATUS && i < n; ++i) {
    if (class_at(i) != MPI_ERR_PENDING || requests_[i] == MPI_REQUEST_NULL) continue;
    const int w = MPI_Wait(&requests_[i], &statuses_[i]);
    int c = MPI_SUCCESS;
    if (w != MPI_SUCCESS) MPI_Error_class(w, &c);
    if (c != MPI_SUCCESS && c != MPI_ERR_TRUNCATE) check_mpi(w, "MPI_Wait");
    if (c == MPI_ERR_TRUNCATE) statuses_[i].MPI_ERROR = w;
    else statuses_[i].MPI_ERROR = MPI_SUCCESS;
  }
  if (rc != MPI_SUCCESS && !truncated_) {
    try {
      check_statuses(rc, statuses_.data(), n, call);
    } catch (const Error&) {
      truncated_ = std::current_exception();
    }
  }
  for (std::size_t i = 0; i < receives_ && i < expected_.size(); ++i) {
    if (error_class == MPI_ERR_IN_STATUS && statuses_[i].MPI_ERROR != MPI_SUCCESS) {
      if (class_at(i) != MPI_ERR_TRUNCATE) continue;
      const int got = -1;  // a longer message than the receive: truncated by MPI
      record_wrong_size(i, statuses_[i].MPI_SOURCE, got);
    } else {
      check_size(i, statuses_[i]);
    }
  }
}

void Execution::check_size(std::size_t receive, const MPI_Status& status) {
  // Messages are at most max_message_bytes (<= INT_MAX): MPI_Get_count's int holds them
  // (and SimGrid's SMPI, which runs this code in tools/sim, has no _x variant).
  int got = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &got), "MPI_Get_count");
  if (got >= 0 && static_cast<std::size_t>(got) == expected_[receive]) return;
  record_wrong_size(receive, status.MPI_SOURCE, got);
}

void Execution::record_wrong_size(std::size_t receive, int source, int got) {
  mark_suspect(receive);
  if (truncated_) return;
  truncated_ = std::make_exception_ptr(
      Error(MPI_ERR_TRUNCATE, "agx: a message from rank " + std::to_string(source) + " brought " +
                                  (got >= 0 ? std::to_string(got) : std::string("more")) +
                                  " bytes where " + std::to_string(expected_[receive]) +
                                  " were expected (the ranks disagree on the counts)"));
}

// Blocks that came with the wrong size are forwarded one byte short, so that every rank
// that receives them, directly or through others, sees a size mismatch too and fails
// with MPI_ERR_TRUNCATE instead of returning stale bytes as success.
void Execution::mark_suspect(std::size_t receive) {
  const Transfer* t = receive < recv_transfers_.size() ? recv_transfers_[receive] : nullptr;
  if (t != nullptr) suspect_blocks(*t);
}

void Execution::suspect_blocks(const Transfer& t) {
  if (suspect_.empty()) suspect_.assign(static_cast<std::size_t>(layout_.nranks()), 0);
  for (const BlockSpan& b : t.blocks)
    for (int k = b.first; k < b.first + b.count; ++k) suspect_[static_cast<std::size_t>(k)] = 1;
}

// A node that found the ranks disagreeing on a block's size (NodeSegment::disagreement)
// sends what it forwards from the segment one byte short from then on: the receivers on
// other nodes fail with MPI_ERR_TRUNCATE too instead of taking stale bytes.
void Execution::suspect_if_disagreed(const Transfer& t) {
  if (node_->disagreement()) suspect_blocks(t);
}

bool Execution::carries_suspect(const Transfer& t) const {
  if (suspect_.empty()) return false;
  for (const BlockSpan& b : t.blocks)
    for (int k = b.first; k < b.first + b.count; ++k)
      if (suspect_[static_cast<std::size_t>(k)] != 0) return true;
  return false;
}

void Execution::end_round() {
  clear_round();
  deferred_.clear();
  if (round_checks_) round_checks_->end_round(round_);
  if (node_ != nullptr && segment_recvs_) node_->segment_round_done(truncated_ != nullptr);
  if (node_ != nullptr) signal_round(schedule_.rounds[round_]);
  if (++round_ < schedule_.rounds.size()) post_round();
  else if (round_checks_) round_checks_->finish();
  if (round_ == schedule_.rounds.size() && node_ != nullptr) node_->finish();
}

void Execution::post_round() {
  const Round& round = schedule_.rounds[round_];
  const bool checksums = round_checks_ && round_checks_->carries_checksums();
  if (checksums) round_checks_->pack(round_);
  segment_recvs_ = false;
  statuses_checked_ = false;
  // The round's device copies: to_host now (round 0's: start()), to_device as its
  // receives complete (poll()).
  if (device_ != nullptr && round_ != 0) issue_to_host(round_);
  // A persistent execution starts the round's requests, unless a block it forwards
  // came with the wrong size (mark_suspect): then the round is posted per call.
  if (!stored_.empty() && suspect_.empty()) start_stored();
  else post_transfers(round, checksums);
  if (polling()) {
    open_ = requests_.size();
    done_indices_.resize(requests_.size());
  }
  copy_round();
}

// The round's local copies (core/schedule.hpp: the own block, out of place), once its
// messages are posted: a send of the own block reads the send buffer, so they overlap.
// A staged schedule's own copy is device-level: the device makes it.
void Execution::copy_round() {
  const Round& round = schedule_.rounds[round_];
  make_copies(round, buffers_, layout_);
  if (device_ != nullptr)
    for (const Copy& c : round.copies)
      if (c.level == Level::device) device_->copy_own();
}

void Execution::post_transfers(const Round& round, bool checksums) {
  if (node_ != nullptr) {
    std::size_t gets = 0;
    put_round(round);
    for (const NodeOp& op : round.node) gets += op.kind == NodeOp::Kind::get || op.kind == NodeOp::Kind::read;
    cursors_.assign(gets, GetCursor{});
    for (const Transfer& t : round.recvs) segment_recvs_ = segment_recvs_ || t.place == Place::segment;
  }
  // Receives first, so that eager sends find a posted buffer. With AGX_INTEGRITY each
  // transfer's checksum message follows its data pieces, on both sides (integrity.hpp).
  for (int pass = 0; pass < 2; ++pass) {
    const bool is_send = pass == 1;
    const auto& transfers = is_send ? round.sends : round.recvs;
    for (std::size_t k = 0; k < transfers.size(); ++k) {
      const Transfer& t = transfers[k];
      // A send from the segment waits (in test()) until its blocks are there.
      if (is_send && t.place == Place::segment && !node_->holds(t)) {
        deferred_.push_back(&t);
        continue;
      }
      if (is_send && t.place == Place::segment) suspect_if_disagreed(t);
      post_transfer(is_send, t, k, checksums);
    }
  }
}

void Execution::post_transfer(bool is_send, const Transfer& t, std::size_t k, bool checksums) {
  if (device_ != nullptr) {  // where the own block lies in a send's data (before_send)
    piece_at_ = 0;
    own_before_ = std::string::npos;
    std::size_t at = 0;
    for (const BlockSpan& b : t.blocks)
      for (int i = b.first; is_send && i < b.first + b.count; at += layout_.bytes(i++))
        if (i == schedule_.rank) own_before_ = at;
  }
  // A suspect block's send is planned per call: it goes one byte short (mark_suspect).
  if (compiled_ && t.place == Place::buffer && !(is_send && carries_suspect(t))) {
    for (const MessageDesc& m : is_send ? compiled_->send(round_, k) : compiled_->recv(round_, k))
      post_compiled(is_send, t, m);
  } else {
    if (t.place == Place::segment)
      plan_message(t, schedule_.rank, node_->segment_buffers(), node_->segment_layout(),
                   max_message_bytes_, message_);
    else
      plan_message(t, schedule_.rank, buffers_, layout_, max_message_bytes_, message_, pieces_);
    for (std::size_t i = 0; i < message_.pieces(); ++i) {
      const std::size_t b = message_.piece_begin[i], e = message_.piece_begin[i + 1];
      post(is_send, t.peer, message_.segments.data() + b, e - b, t, false);
    }
  }
  if (checksums) {
    const std::span<BlockCheck> m = round_checks_->message(round_, is_send, k);
    const Segment s{reinterpret_cast<std::byte*>(m.data()), m.size_bytes()};
    post(is_send, t.peer, &s, 1, t, true);
  }
}

MessageArgs message_args(const Segment* segments, std::size_t count,
                         std::vector<MPI_Datatype>& types) {
  MessageArgs m{segments[0].ptr, static_cast<int>(segments[0].bytes), MPI_BYTE};
  if (count == 1) return m;
  // several memory pieces in one message: describe them with a datatype
  std::vector<int> lengths(count);
  std::vector<MPI_Aint> addresses(count);
  for (std::size_t i = 0; i < count; ++i) {
    lengths[i] = static_cast<int>(segments[i].bytes);
    check_mpi(MPI_Get_address(segments[i].ptr, &addresses[i]), "MPI_Get_address");
  }
  MPI_Datatype type = MPI_DATATYPE_NULL;
  check_mpi(MPI_Type_create_hindexed(static_cast<int>(count), lengths.data(), addresses.data(),
                                     MPI_BYTE, &type),
            "MPI_Type_create_hindexed");
  types.push_back(type);  // freed by the caller, even if commit fails
  check_mpi(MPI_Type_commit(&types.back()), "MPI_Type_commit");
  return {MPI_BOTTOM, 1, types.back()};
}

void Execution::post(bool is_send, int peer, const Segment* segments, std::size_t count,
                     const Transfer& transfer, bool checksums) {
  MPI_Request request = MPI_REQUEST_NULL;
  std::size_t bytes = 0;  // for a shortened send, what its piece would carry (before_send)
  for (std::size_t i = 0; i < count; ++i) bytes += segments[i].bytes;
  if (is_send && !checksums) before_send(bytes);
  std::vector<Segment> shortened;  // a suspect block's message, one byte short (mark_suspect)
  if (is_send && !checksums && carries_suspect(transfer)) {
    shortened.assign(segments, segments + count);
    for (auto it = shortened.rbegin(); it != shortened.rend(); ++it)
      if (it->bytes > 0) {
        --it->bytes;
        break;
      }
    segments = shortened.data();
  }
  const MessageArgs m = message_args(segments, count, types_);
  if (is_send)
    check_mpi(calls_->send(m.base, m.count, m.type, peer, tag_, comm_, &request),
              calls_->send_name);
  else
    check_mpi(calls_->recv(m.base, m.count, m.type, peer, tag_, comm_, &request),
              calls_->recv_name);
  posted(request, is_send, transfer, bytes, checksums);
}

void Execution::post_compiled(bool is_send, const Transfer& transfer, const MessageDesc& m) {
  std::byte* base = m.from_send ? static_cast<std::byte*>(const_cast<void*>(buffers_.send))
                                : static_cast<std::byte*>(buffers_.recv);
  MPI_Request request = MPI_REQUEST_NULL;
  if (is_send) before_send(m.bytes);
  if (is_send)
    check_mpi(calls_->send(base + m.offset, m.count, m.type, transfer.peer, tag_, comm_, &request),
              calls_->send_name);
  else
    check_mpi(calls_->recv(base + m.offset, m.count, m.type, transfer.peer, tag_, comm_, &request),
              calls_->recv_name);
  posted(request, is_send, transfer, m.bytes, false);
}

void Execution::posted(MPI_Request request, bool is_send, const Transfer& transfer,
                       std::size_t bytes, bool checksums) {
  requests_.push_back(request);
  if (!is_send) {
    ++receives_;
    recv_transfers_.push_back(checksums ? nullptr : &transfer);
    expected_.push_back(bytes);
  }
  if (timeout_ > 0) posted_.push_back({is_send, checksums, &transfer});
  if (device_ == nullptr) return;
  if (!is_send) recv_begin_.push_back(piece_at_);
  if (!checksums) piece_at_ += bytes;
}

void Execution::before_send(std::size_t bytes) {
  if (device_ == nullptr || own_before_ == std::string::npos || piece_at_ + bytes <= own_before_)
    return;
  device_->own_needed(std::min(piece_at_ + bytes - own_before_, layout_.bytes(schedule_.rank)));
}

void Execution::issue_to_host(std::size_t round) {
  for (const DeviceCopy& d : schedule_.rounds[round].device)
    if (d.kind == DeviceCopy::Kind::to_host) device_->own_to_host();  // (the own block: validator)
}

// Every span inside a span of one of the round's to_device copies (the validator admits
// only whole receives and gets of the round).
bool Execution::to_device(const std::vector<BlockSpan>& blocks) const {
  for (const BlockSpan& b : blocks) {
    bool inside = false;
    for (const DeviceCopy& d : schedule_.rounds[round_].device)
      if (d.kind == DeviceCopy::Kind::to_device)
        for (const BlockSpan& c : d.blocks)
          inside = inside || (c.first <= b.first && b.first + b.count <= c.first + c.count);
    if (!inside) return false;
  }
  return true;
}

namespace {

std::string block_list(const std::vector<BlockSpan>& spans) {
  std::string s;
  int count = 0;
  for (const BlockSpan& b : spans) {
    if (b.count <= 0) continue;
    if (!s.empty()) s += ',';
    s += std::to_string(b.first);
    if (b.count > 1) {
      s += '-';
      s += std::to_string(b.first + b.count - 1);
    }
    count += b.count;
  }
  return std::string(count == 1 ? "block " : "blocks ") + s;
}

// Whether a request of the round is still open: a completed one is null, a completed
// persistent one stays allocated and inactive.
bool still_open(MPI_Request request, bool persistent) {
  if (request == MPI_REQUEST_NULL) return false;
  int done = 0;
  if (persistent) MPI_Request_get_status(request, &done, MPI_STATUS_IGNORE);
  return done == 0;
}

// The AGX_TIMEOUT line for a round whose requests did not all complete.
std::string stall_report(MPI_Comm comm, int rank, const Checks& checks, std::size_t round,
                         std::size_t rounds, double seconds, const MPI_Request* requests,
                         const PostedRequest* posted, std::size_t count, bool persistent) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", seconds);
  std::string line = "agx: AGX_TIMEOUT: " + rank_in(comm, rank) + " made no progress for " +
                     secs + " s in algorithm " + checks.name() + ", round " +
                     std::to_string(round) + " of " + std::to_string(rounds) +
                     " (rounds count from 0):";
  // One entry per transfer with a request still open (its pieces and checksums together).
  std::string receives, sends;
  const Transfer* last = nullptr;
  for (std::size_t i = 0; i < count; ++i) {
    if (posted[i].transfer == last || !still_open(requests[i], persistent)) continue;
    last = posted[i].transfer;
    const Transfer& t = *posted[i].transfer;
    const std::string peer = "rank " + std::to_string(t.peer) + " (world rank " +
                             std::to_string(world_rank_of(comm, t.peer)) + ")";
    std::string& list = posted[i].is_send ? sends : receives;
    list += list.empty() ? " " : "; ";
    list += block_list(t.blocks);
    list += posted[i].is_send ? " to " : " from ";
    list += peer;
    if (posted[i].checksums) list += " (its checksums)";
  }
  line += receives.empty() ? " no receive pending;" : " waiting to receive" + receives + ";";
  line += sends.empty() ? " no send pending" : " sends not yet complete:" + sends;
  return line;
}

}  // namespace

void Execution::stalled() {
  std::string line =
      stall_report(comm_, schedule_.rank, checks_, round_, schedule_.rounds.size(),
                   clock_->seconds(), requests_.data(), posted_.data(), requests_.size(),
                   loaded_ != nullptr);
  if (node_ != nullptr && round_ < schedule_.rounds.size()) {
    const auto& ops = schedule_.rounds[round_].node;
    for (std::size_t i = 0, g = 0; i < ops.size(); ++i)
      if (ops[i].kind == NodeOp::Kind::get || ops[i].kind == NodeOp::Kind::read) {
        const std::string what = node_->waiting_for(ops[i], cursors_[g++]);
        const std::string name = node_op_name(ops[i].kind);
        line += what.empty() ? "; node " + name + "s done" : "; node " + name + " waiting for " + what;
      } else if (ops[i].kind == NodeOp::Kind::release) {
        const std::string what = node_->waiting_for(ops[i], GetCursor{});
        if (!what.empty()) line += "; node release waiting for " + what;
      }
  } else if (node_ != nullptr) {
    line += "; every round done, waiting for " + node_->finish_waiting_for();
  }
  if (!config().timeout_abort) abandon();
  report_hang(comm_, line);
}

void execute(const Schedule& schedule, const Buffers& buffers, const Layout& layout, MPI_Comm comm,
             int tag, std::size_t max_message_bytes, const Checks& checks) {
  Execution e(schedule, buffers, layout, comm, tag, max_message_bytes, checks);
  e.start();
  e.wait();
}

}  // namespace agx
