// Persistent all-gather (agx::Plan): everything but the data movement is done once.
//
// At planning: the algorithm is chosen, the schedule planned, the communicator
// duplicated (the plan's messages can never match another call's, whatever runs
// at the same time), every transfer cut into messages, hindexed datatypes built for
// multi-piece messages, and one MPI persistent request (MPI_Send_init/MPI_Recv_init)
// made per message, grouped by round. A start copies the own block into place and
// MPI_Startall's round 0; test() completes a round and starts the next one.
// One tag (0) serves every round and start: MPI's non-overtaking order between a
// pair of ranks matches the pieces in schedule order, as in the blocking executor.
// A forced shared_memory/hierarchical plan runs lib/hier to completion per start.
// AGX_INTEGRITY adds one persistent checksum message after each transfer's data pieces,
// AGX_TIMEOUT polls a round with MPI_Testsome, as in the executor (docs/reliability.md).
// A failed start or test releases the running round (abandon_round) and leaves the
// plan failed: later starts throw MPI_ERR_REQUEST, the destructor frees the rest but
// keeps the communicator allocated (free_comm in core/executor.hpp).

#include "core/nonblocking.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/executor.hpp"
#include "core/integrity.hpp"
#include "core/message.hpp"
#include "core/mpi_check.hpp"
#include "core/timeout.hpp"
#include "cuda/device_path.hpp"
#include "hier/hier.hpp"

#include <cstring>
#include <optional>

namespace agx::detail {
namespace {

class Persistent final : public Operation {
 public:
  Persistent(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers, const Layout& layout)
      : Operation(a, layout),
        ctx_(ctx.share()),
        buffers_(buffers),
        rank_(ctx.rank()),
        checks_(Checks::of(a.id)),
        timeout_(timeout_seconds()) {
    if (is_node_path(a.id)) return;  // a node call per start (lib/hier/node_call.cpp)
    try {
      build(ctx.schedule(a));
    } catch (...) {
      release();
      throw;
    }
  }
  ~Persistent() override { release(); }

 private:
  void build(const Schedule& schedule) {
    check_mpi(MPI_Comm_dup(ctx_->comm(), &comm_), "MPI_Comm_dup");
    if (RoundChecks::needed(checks_, rank_))
      round_checks_.emplace(schedule, buffers_, layout(), checks_);
    const bool checksums = round_checks_ && round_checks_->carries_checksums();
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
          plan_message(t, rank_, buffers_, layout(), config().max_message_bytes, message);
          for (std::size_t i = 0; i < message.pieces(); ++i) {
            const std::size_t b = message.piece_begin[i], e = message.piece_begin[i + 1];
            init(r, is_send, t, false, message_args(message.segments.data() + b, e - b, types_));
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

  void init(std::size_t r, bool is_send, const Transfer& t, bool checksums, const MessageArgs& m) {
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

  void release() noexcept {
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

  void start_round() {
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
  void abandon_round() noexcept {
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
  void end_round() {
    if (round_checks_) round_checks_->end_round(round_);
    if (++round_ < rounds_.size()) start_round();
    else if (round_checks_) round_checks_->finish();
  }

  // AGX_TIMEOUT: one MPI_Testsome; false while the round is open.
  bool poll_round() {
    auto& round = rounds_[round_];
    open_ = test_some(round, done_indices_, open_, *clock_);
    if (open_ == 0) return true;
    if (clock_->stalled()) stalled();
    return false;
  }

  [[noreturn]] void stalled() {
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

  void do_start() override {
    if (failed_)
      throw Error(MPI_ERR_REQUEST,
                  "agx: start() on a plan whose earlier start failed; make a new plan");
    // Device buffers: the device path (lib/cuda), advanced by do_test; the host path
    // starts when lib/cuda settles the call (at once where no rank sees a GPU; else in
    // call order once the ranks agreed on memory kinds).
    device_.reset();
    device_.emplace(*ctx_, choice(), buffers_, layout(), [this] { start_host(); });
  }

  void start_host() {
    if (is_node_path(algorithm())) {
      node_ = hier::start_node_call(*ctx_, algorithm(), buffers_, layout());
      return;
    }
    round_ = 0;
    if (round_checks_) round_checks_->start();
    if (timeout_ > 0) clock_.emplace(timeout_);
    try {
      if (!rounds_.empty()) start_round();
    } catch (...) {
      abandon_round();
      throw;
    }
    const std::size_t own = layout().bytes(rank_);
    if (!buffers_.in_place && own > 0)  // overlaps round 0, as in the executor
      std::memcpy(static_cast<std::byte*>(buffers_.recv) + layout().offset(rank_), buffers_.send,
                  own);
  }

  bool do_test() override {
    if (device_) {
      const std::optional<bool> on_device = device_->test();
      if (!on_device) return false;
      if (*on_device) return true;
    }
    if (is_node_path(algorithm())) return hier::test_node_call(*node_);
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

  std::shared_ptr<CommContext> ctx_;  // kept alive past MPI_Comm_free (comm_context.hpp)
  Buffers buffers_;
  int rank_;
  Checks checks_;
  double timeout_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<std::vector<MPI_Request>> rounds_;
  std::vector<std::vector<Execution::Posted>> posted_;  // per request of rounds_
  std::vector<MPI_Datatype> types_;
  std::size_t round_ = 0;
  std::optional<cuda::DeviceCall> device_;  ///< the last start's way through lib/cuda
  bool round_started_ = false;  ///< rounds_[round_] was started and is not yet complete
  bool failed_ = false;
  hier::NodeCallPtr node_;  ///< the running start of a node path
  std::optional<RoundChecks> round_checks_;
  std::optional<StallClock> clock_;
  std::size_t open_ = 0;
  std::vector<int> done_indices_;
  std::vector<MPI_Status> statuses_;  // of MPI_Testall
};

}  // namespace

OperationPtr make_persistent(CommContext& ctx, const AlgorithmChoice& a, const Buffers& buffers,
                             const Layout& layout) {
  OperationPtr op(new Persistent(ctx, a, buffers, layout));
  progress_register(op.get());
  return op;
}

}  // namespace agx::detail
