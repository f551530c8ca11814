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
// A failed start or test releases the running round (abandon_round) and leaves the
// plan failed: later starts throw MPI_ERR_REQUEST, the destructor frees the rest but
// keeps the communicator allocated (free_comm in core/executor.hpp).

#include "core/nonblocking.hpp"

#include <agx/error.hpp>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/executor.hpp"
#include "core/message.hpp"
#include "core/mpi_check.hpp"
#include "hier/hier.hpp"

#include <cstring>

namespace agx::detail {
namespace {

class Persistent final : public Operation {
 public:
  Persistent(CommContext& ctx, Algorithm a, const Buffers& buffers, const Layout& layout)
      : Operation(a, layout), ctx_(ctx), buffers_(buffers), rank_(ctx.rank()) {
    if (is_blocking_path(a)) return;
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
    check_mpi(MPI_Comm_dup(ctx_.comm(), &comm_), "MPI_Comm_dup");
    MessagePlan message;
    rounds_.resize(schedule.rounds.size());
    receives_.assign(schedule.rounds.size(), 0);
    for (std::size_t r = 0; r < schedule.rounds.size(); ++r) {
      const Round& round = schedule.rounds[r];
      for (int pass = 0; pass < 2; ++pass) {  // receives first, as the executor posts them
        const bool is_send = pass == 1;
        for (const Transfer& t : is_send ? round.sends : round.recvs) {
          plan_message(t, rank_, buffers_, layout(), config().max_message_bytes, message);
          for (std::size_t i = 0; i < message.pieces(); ++i) {
            const std::size_t b = message.piece_begin[i], e = message.piece_begin[i + 1];
            const MessageArgs m = message_args(message.segments.data() + b, e - b, types_);
            MPI_Request request = MPI_REQUEST_NULL;
            if (is_send)
              check_mpi(MPI_Send_init(m.base, m.count, m.type, t.peer, 0, comm_, &request),
                        "MPI_Send_init");
            else
              check_mpi(MPI_Recv_init(m.base, m.count, m.type, t.peer, 0, comm_, &request),
                        "MPI_Recv_init");
            rounds_[r].push_back(request);
            if (!is_send) ++receives_[r];
          }
        }
      }
    }
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
    round_started_ = false;
    if (round.empty()) return;
    check_mpi(MPI_Startall(static_cast<int>(round.size()), round.data()), "MPI_Startall");
    round_started_ = true;
  }

  // After a failed MPI call the running round's requests may still be active, pointing
  // into the caller's buffers: receives are cancelled and completed, sends freed (MPI
  // completes them in the background; Open MPI cannot cancel sends), as the executor
  // does. A freed send cannot be started again, so the plan is failed from now on.
  void abandon_round() noexcept {
    failed_ = true;
    mark_abandoned(comm_);
    if (round_ >= rounds_.size() || !round_started_) return;
    auto& round = rounds_[round_];
    for (std::size_t i = 0; i < round.size(); ++i) {
      MPI_Request& r = round[i];
      if (r == MPI_REQUEST_NULL) continue;
      if (i < receives_[round_]) {
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);  // inactive again; freed with the plan
      } else {
        MPI_Request_free(&r);
      }
    }
    round_started_ = false;
  }

  void do_start() override {
    if (failed_)
      throw Error(MPI_ERR_REQUEST,
                  "agx: start() on a plan whose earlier start failed; make a new plan");
    if (is_blocking_path(algorithm())) {
      hier::run(ctx_, algorithm(), buffers_, layout());
      return;
    }
    round_ = 0;
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
    if (is_blocking_path(algorithm())) return true;
    try {
      while (round_ < rounds_.size()) {
        auto& round = rounds_[round_];
        int done = 0;
        check_mpi(MPI_Testall(static_cast<int>(round.size()), round.data(), &done,
                              MPI_STATUSES_IGNORE),
                  "MPI_Testall");
        if (!done) return false;
        if (++round_ < rounds_.size()) start_round();
      }
    } catch (...) {
      abandon_round();
      throw;
    }
    return true;
  }

  CommContext& ctx_;
  Buffers buffers_;
  int rank_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<std::vector<MPI_Request>> rounds_;  // per round: receives first, then sends
  std::vector<std::size_t> receives_;             // per round: how many are receives
  std::vector<MPI_Datatype> types_;
  std::size_t round_ = 0;
  bool round_started_ = false;  // rounds_[round_] was started and is not yet complete
  bool failed_ = false;
};

}  // namespace

OperationPtr make_persistent(CommContext& ctx, Algorithm a, const Buffers& buffers,
                             const Layout& layout) {
  OperationPtr op(new Persistent(ctx, a, buffers, layout));
  progress_register(op.get());
  return op;
}

}  // namespace agx::detail
