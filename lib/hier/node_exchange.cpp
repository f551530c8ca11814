// Nonblocking node exchanges (node_exchange.hpp).

#include "hier/node_exchange.hpp"

#include "core/mpi_check.hpp"

#include <algorithm>
#include <utility>

namespace agx::hier {
namespace {

class CollectiveExchange final : public NodeExchange {
 public:
  explicit CollectiveExchange(MPI_Comm node_comm) : comm_(node_comm) {
    check_mpi(MPI_Comm_rank(comm_, &local_), "MPI_Comm_rank");
  }
  int local() const override { return local_; }
  void start_bcast(void* data, int bytes) override {
    check_mpi(MPI_Ibcast(data, bytes, MPI_BYTE, 0, comm_, &request_), "MPI_Ibcast");
  }
  void start_max(const int* in, int* out) override {
    check_mpi(MPI_Iallreduce(in, out, 1, MPI_INT, MPI_MAX, comm_, &request_), "MPI_Iallreduce");
  }
  bool test() override {
    int flag = 0;
    check_mpi(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    return flag != 0;
  }
  void wait() override { check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait"); }

 private:
  MPI_Comm comm_;
  int local_ = 0;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// Local rank 0 is the root of both exchanges: it sends the record to each member; for
// the maximum every member sends it its value, and once it has them all it sends each
// the result. Messages between two ranks with one tag are received in the order sent,
// so successive exchanges need no tags of their own.
class P2pExchange final : public NodeExchange {
 public:
  P2pExchange(MPI_Comm comm, std::vector<int> members, int local, int tag)
      : comm_(comm), members_(std::move(members)), local_(local), tag_(tag) {}
  ~P2pExchange() override {
    // Only after an error (a completed exchange has nothing open): pending receives
    // are cancelled, sends released.
    for (MPI_Request& r : requests_)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
  }
  int local() const override { return local_; }

  void start_bcast(void* data, int bytes) override {
    requests_.clear();
    if (local_ == 0) {
      for (std::size_t i = 1; i < members_.size(); ++i) post_send(data, bytes, members_[i]);
    } else {
      post_recv(data, bytes, members_[0]);
    }
    max_out_ = nullptr;
  }

  void start_max(const int* in, int* out) override {
    requests_.clear();
    max_out_ = out;
    if (local_ == 0) {
      *out = *in;
      values_.assign(members_.size(), 0);
      for (std::size_t i = 1; i < members_.size(); ++i)
        post_recv(&values_[i], static_cast<int>(sizeof(int)), members_[i]);
      gathering_ = true;
    } else {
      mine_ = *in;
      post_send(&mine_, static_cast<int>(sizeof(int)), members_[0]);
      post_recv(out, static_cast<int>(sizeof(int)), members_[0]);
      gathering_ = false;
    }
  }

  bool test() override {
    if (!requests_.empty()) {
      int flag = 0;
      check_mpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag,
                            MPI_STATUSES_IGNORE),
                "MPI_Testall");
      if (!flag) return false;
      requests_.clear();
    }
    if (gathering_) {  // the root has every value: the result goes back
      gathering_ = false;
      for (std::size_t i = 1; i < members_.size(); ++i) *max_out_ = std::max(*max_out_, values_[i]);
      for (std::size_t i = 1; i < members_.size(); ++i)
        post_send(max_out_, static_cast<int>(sizeof(int)), members_[i]);
      return test();
    }
    return true;
  }

  void wait() override {
    while (!test())
      if (!requests_.empty())
        check_mpi(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(),
                              MPI_STATUSES_IGNORE),
                  "MPI_Waitall");
  }

 private:
  void post_send(const void* data, int bytes, int to) {
    requests_.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Isend(data, bytes, MPI_BYTE, to, tag_, comm_, &requests_.back()), "MPI_Isend");
  }
  void post_recv(void* data, int bytes, int from) {
    requests_.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Irecv(data, bytes, MPI_BYTE, from, tag_, comm_, &requests_.back()), "MPI_Irecv");
  }

  MPI_Comm comm_;
  std::vector<int> members_;
  int local_ = 0;
  int tag_ = 0;
  std::vector<MPI_Request> requests_;
  std::vector<int> values_;
  int mine_ = 0;
  int* max_out_ = nullptr;
  bool gathering_ = false;
};

}  // namespace

std::unique_ptr<NodeExchange> collective_exchange(MPI_Comm node_comm) {
  return std::make_unique<CollectiveExchange>(node_comm);
}

std::unique_ptr<NodeExchange> p2p_exchange(MPI_Comm comm, std::vector<int> members, int local,
                                           int tag) {
  return std::make_unique<P2pExchange>(comm, std::move(members), local, tag);
}

}  // namespace agx::hier
