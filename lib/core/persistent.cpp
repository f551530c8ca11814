// Persistent all-gather (agx::Plan): everything but the data movement is done once.
//
// At planning: the algorithm is chosen, the schedule planned, the communicator
// duplicated (the plan's messages can never match another call's, whatever runs
// at the same time), every transfer cut into messages with hindexed datatypes for
// multi-piece messages (the context's compiled descriptors, descriptors.hpp, shared with
// the blocking calls of the same shape and held by the plan; planned here when the cache
// is off), and one MPI persistent request (MPI_Send_init/MPI_Recv_init)
// made per message, grouped by round. A start copies the own block into place and
// MPI_Startall's round 0; test() completes a round and starts the next one.
// One tag (0) serves every round and start: MPI's non-overtaking order between a
// pair of ranks matches the pieces in schedule order, as in the blocking executor.
// Device buffers and the node paths are lib/api's dispatch (api/dispatch.cpp): a plan
// of those paths makes no PersistentRounds.
// AGX_INTEGRITY adds one persistent checksum message after each transfer's data pieces,
// AGX_TIMEOUT polls a round with MPI_Testsome, as in the executor (docs/reliability.md).
// A failed start or test releases the running round (abandon_round) and leaves the
// plan failed: later starts throw MPI_ERR_REQUEST, the destructor frees the rest but
// keeps the communicator allocated (free_comm in core/executor.hpp).

#include "core/persistent.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/copy.hpp"
#include "core/executor.hpp"
#include "core/integrity.hpp"
#include "core/message.hpp"
#include "core/mpi_check.hpp"
#include "core/timeout.hpp"

#include <cstring>
#include <optional>

namespace agx::detail {

PersistentRounds::PersistentRounds(CommContext& ctx, const AlgorithmChoice& a,
                                   const Buffers& buffers, const Layout& layout)
    : comm_state_(ctx.share()),
      buffers_(buffers),
      layout_(layout),
      rank_(ctx.rank()),
      checks_(Checks::of(a.id)),
      timeout_(timeout_seconds()) {
  try {
    build(ctx.schedule(a));
  } catch (...) {
    release();
    throw;
  }
}

PersistentRounds::~PersistentRounds() { release(); }

void PersistentRounds::build(const Schedule& schedule) {
  check_mpi(MPI_Comm_dup(comm_state_->comm(), &comm_), "MPI_Comm_dup");
  if (RoundChecks::needed(checks_, rank_))
    round_checks_.emplace(schedule, buffers_, layout_, checks_);
  const bool checksums = round_checks_ && round_checks_->carries_checksums();
  compiled_ = comm_state_->compiled(schedule, layout_, buffers_.in_place, config().max_message_bytes);
  MessagePlan message;
  rounds_.resize(schedule.rounds.size());
  posted_.resize(schedule.rounds.size());
  for (std::size_t r = 0; r < schedule.rounds.size(); ++r) {
    const Round& round = schedule.rounds[r];
    for (int pass = 0; pass < 2; ++pass) {  // receives first, as the executor posts them
      const bool is_send = pass == 1;
      const auto& transfers = is_send ? round.sends : round.recvs;
      for (std::size_t k = 0; k < transfers.size(); ++k) {
        const Transfer& t = transfers[k];
        if (compiled_) {
          for (const MessageDesc& m : is_send ? compiled_->send(r, k) : compiled_->recv(r, k)) {
            std::byte* base = m.from_send ? static_cast<std::byte*>(const_cast<void*>(buffers_.send))
                                          : static_cast<std::byte*>(buffers_.recv);
            init(r, is_send, t, false, MessageArgs{base + m.offset, m.count, m.type});
          }
        } else {
          plan_message(t, rank_, buffers_, layout_, config().max_message_bytes, message);
          for (std::size_t i = 0; i < message.pieces(); ++i) {
            const std::size_t b = message.piece_begin[i], e = message.piece_begin[i + 1];
            init(r, is_send, t, false, message_args(message.segments.data() + b, e - b, types_));
          }
        }
        if (checksums) {  // after the data pieces, as in the executor (integrity.hpp)
          const std::span<BlockCheck> m = round_checks_->message(r, is_send, k);
          init(r, is_send, t, true,
               MessageArgs{m.data(), static_cast<int>(m.size_bytes()), MPI_BYTE});
        }
      }
    }
  }
}

void PersistentRounds::init(std::size_t r, bool is_send, const Transfer& t, bool checksums, const MessageArgs& m) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (is_send)
    check_mpi(MPI_Send_init(m.base, m.count, m.type, t.peer, 0, comm_, &request),
              "MPI_Send_init");
  else
    check_mpi(MPI_Recv_init(m.base, m.count, m.type, t.peer, 0, comm_, &request),
              "MPI_Recv_init");
  rounds_[r].push_back(request);
  posted_[r].push_back({is_send, checksums, &t});
}

void PersistentRounds::release() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI has released everything already
  for (auto& round : rounds_)
    for (MPI_Request& r : round)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  for (MPI_Datatype& t : types_) MPI_Type_free(&t);
  free_comm(comm_);  // kept allocated after a failed start (executor.hpp)
  rounds_.clear();
  types_.clear();
}

void PersistentRounds::start_round() {
  auto& round = rounds_[round_];
  if (round_checks_) round_checks_->pack(round_);
  open_ = round.size();
  if (clock_) clock_->restart();
  round_started_ = false;
  if (round.empty()) return;
  check_mpi(MPI_Startall(static_cast<int>(round.size()), round.data()), "MPI_Startall");
  round_started_ = true;
}

// After a failed MPI call (or a stall under AGX_TIMEOUT_ACTION=error) the running
// round's requests may still be active, pointing into the caller's buffers: receives
// are cancelled and completed, sends freed (MPI completes them in the background; Open
// MPI cannot cancel sends), as the executor does (core/timeout.hpp's abandon). A freed
// send cannot be started again, so the plan is failed from now on.
void PersistentRounds::abandon_round() noexcept {
  if (round_ >= rounds_.size()) return;  // all rounds complete (a corrupted block found)
  failed_ = true;
  mark_abandoned(comm_);
  if (!round_started_) return;
  auto& round = rounds_[round_];
  std::vector<bool> sends(round.size());
  for (std::size_t i = 0; i < round.size(); ++i) sends[i] = posted_[round_][i].is_send;
  abandon(round.data(), sends);
  round_started_ = false;
}

// A round's requests completed: check it, then start the next one.
void PersistentRounds::end_round() {
  if (round_checks_) round_checks_->end_round(round_);
  if (++round_ < rounds_.size()) start_round();
  else if (round_checks_) round_checks_->finish();
}

// AGX_TIMEOUT: one MPI_Testsome; false while the round is open.
bool PersistentRounds::poll_round() {
  auto& round = rounds_[round_];
  open_ = test_some(round, done_indices_, open_, *clock_);
  if (open_ == 0) return true;
  if (clock_->stalled()) stalled();
  return false;
}

void PersistentRounds::stalled() {
  auto& round = rounds_[round_];
  const auto& posted = posted_[round_];
  // Persistent requests stay allocated when complete: pass only the open ones.
  std::vector<MPI_Request> open;
  std::vector<Execution::Posted> what;
  for (std::size_t i = 0; i < round.size(); ++i) {
    int flag = 0;
    MPI_Request_get_status(round[i], &flag, MPI_STATUS_IGNORE);
    if (!flag) open.push_back(round[i]), what.push_back(posted[i]);
  }
  const std::string line =
      Execution::stall_report(comm_, rank_, checks_, round_, rounds_.size(), clock_->seconds(),
                              open.data(), what.data(), open.size());
  if (!config().timeout_abort) abandon_round();
  report_hang(comm_, line);
}

void PersistentRounds::check_usable() const {
  if (failed_)
    throw Error(MPI_ERR_REQUEST,
                "agx: start() on a plan whose earlier start failed; make a new plan");
}

void PersistentRounds::start() {
  check_usable();
  round_ = 0;
  if (round_checks_) round_checks_->start();
  if (timeout_ > 0) clock_.emplace(timeout_);
  try {
    if (!rounds_.empty()) start_round();
  } catch (...) {
    abandon_round();
    throw;
  }
  const std::size_t own = layout_.bytes(rank_);
  if (!buffers_.in_place && own > 0)  // overlaps round 0, as in the executor
    copy_bytes(static_cast<std::byte*>(buffers_.recv) + layout_.offset(rank_), buffers_.send,
                own);
}

bool PersistentRounds::test() {
  try {
    while (round_ < rounds_.size()) {
      if (timeout_ > 0) {
        if (!poll_round()) return false;
      } else {
        auto& round = rounds_[round_];
        int done = 0;
        MPI_Status* st = statuses_for(statuses_, round.size());
        const WorldReturnsErrors guard;
        check_statuses(MPI_Testall(static_cast<int>(round.size()), round.data(), &done, st), st,
                       round.size(), "MPI_Testall");
        if (!done) return false;
      }
      round_started_ = false;  // complete: nothing of it is in flight
      end_round();
    }
  } catch (...) {
    abandon_round();
    throw;
  }
  return true;
}

}  // namespace agx::detail
