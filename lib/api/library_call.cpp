// A first nonblocking call on a communicator: the MPI library's MPI_Iallgatherv
// (library_call.hpp).

#include "api/library_call.hpp"

#include <agx/error.hpp>

#include "api/context.hpp"
#include "core/mpi_check.hpp"
#include "core/select.hpp"
#include "cuda/backend.hpp"
#include "cuda/memory.hpp"

#include <climits>
#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

namespace agx {
namespace {

class LibraryCall final : public detail::Operation {
 public:
  LibraryCall(MPI_Comm comm, int rank, const Buffers& buffers, const Layout& layout)
      : Operation(AlgorithmChoice{}, layout), comm_(comm), rank_(rank), buffers_(buffers) {}
  ~LibraryCall() override {
    // agx::Request waits for a running call before it destroys it. A request left here
    // failed inside MPI_Test (or outlived MPI_Finalize): MPI allows neither freeing nor
    // cancelling a nonblocking collective's request, so it is left to the MPI library.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && unit_type_ != MPI_BYTE) PMPI_Type_free(&unit_type_);
  }

 private:
  void do_start() override;
  bool do_test() override;

  // The largest unit that divides every size and displacement this rank passes, so that
  // counts in units fit MPI's int where counts in bytes would not.
  std::size_t unit(const std::vector<std::size_t>& at) const;

  MPI_Comm comm_;
  int rank_;
  Buffers buffers_;
  bool recv_staged_ = false;           // receive buffer in device memory: through mirror_
  std::vector<std::byte> send_copy_;   // the own block on the host (device send buffer)
  std::vector<std::byte> mirror_;      // the blocks packed in rank order (device receive)
  std::vector<std::size_t> packed_;    // block b's offset in mirror_
  std::vector<int> counts_, displs_;   // in units of unit_type_
  MPI_Datatype unit_type_ = MPI_BYTE;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

std::size_t LibraryCall::unit(const std::vector<std::size_t>& at) const {
  const Layout& l = layout();
  std::size_t u = 0;
  for (int b = 0; b < l.nranks(); ++b)
    if (l.bytes(b) > 0) u = std::gcd(std::gcd(u, l.bytes(b)), at[static_cast<std::size_t>(b)]);
  return u == 0 ? 1 : u;
}

void LibraryCall::do_start() {
  const Layout& l = layout();
  const int n = l.nranks();
  const std::size_t own = l.bytes(rank_);
  std::size_t total = 0;
  for (int b = 0; b < n; ++b) total += l.bytes(b);
  const bool send_device = !buffers_.in_place && own > 0 && cuda::is_device_memory(buffers_.send);
  recv_staged_ = total > 0 && cuda::is_device_memory(buffers_.recv);

  // Where each block goes: the caller's offsets, or packed in the host mirror.
  std::vector<std::size_t> at(static_cast<std::size_t>(n));
  std::byte* recv = static_cast<std::byte*>(buffers_.recv);
  if (recv_staged_) {
    packed_.resize(at.size());
    std::size_t next = 0;
    for (int b = 0; b < n; ++b) {
      packed_[static_cast<std::size_t>(b)] = next;
      next += l.bytes(b);
    }
    at = packed_;
    mirror_.resize(total);
    recv = mirror_.data();
    if (buffers_.in_place && own > 0)  // the own block is already in the device buffer
      cuda::backend::copy_sync(recv + at[static_cast<std::size_t>(rank_)],
                               static_cast<const std::byte*>(buffers_.recv) + l.offset(rank_), own);
  } else {
    for (int b = 0; b < n; ++b) at[static_cast<std::size_t>(b)] = l.bytes(b) > 0 ? l.offset(b) : 0;
  }
  const void* send = buffers_.in_place ? MPI_IN_PLACE : buffers_.send;
  if (send_device) {
    send_copy_.resize(own);
    cuda::backend::copy_sync(send_copy_.data(), buffers_.send, own);
    send = send_copy_.data();
  }

  const std::size_t u = unit(at);
  counts_.resize(at.size());
  displs_.resize(at.size());
  for (int b = 0; b < n; ++b) {
    const auto k = static_cast<std::size_t>(b);
    const std::size_t count = l.bytes(b) / u, displ = at[k] / u;
    if (count > INT_MAX || displ > INT_MAX)
      throw Error(MPI_ERR_COUNT,
                  "agx: block " + std::to_string(b) + " (" + std::to_string(l.bytes(b)) +
                      " bytes at offset " + std::to_string(at[k]) +
                      ") does not fit the int counts of MPI_Iallgatherv, which serves a "
                      "nonblocking call on a communicator agx has not set up; make one "
                      "blocking all-gather on the communicator first");
    counts_[k] = static_cast<int>(count);
    displs_[k] = static_cast<int>(displ);
  }
  if (u > 1) {
    check_mpi(PMPI_Type_contiguous(static_cast<int>(u), MPI_BYTE, &unit_type_), "MPI_Type_contiguous");
    check_mpi(PMPI_Type_commit(&unit_type_), "MPI_Type_commit");
  }
  // PMPI_ on purpose: under the interposer, MPI_Iallgatherv would re-enter agx.
  check_mpi(PMPI_Iallgatherv(send, counts_[static_cast<std::size_t>(rank_)], unit_type_, recv,
                             counts_.data(), displs_.data(), unit_type_, comm_, &request_),
            "MPI_Iallgatherv");
}

bool LibraryCall::do_test() {
  int done = 0;
  check_mpi(PMPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (!done) return false;
  if (recv_staged_) {
    const Layout& l = layout();
    for (int b = 0; b < l.nranks(); ++b)
      if (l.bytes(b) > 0 && !(buffers_.in_place && b == rank_))
        cuda::backend::copy_sync(static_cast<std::byte*>(buffers_.recv) + l.offset(b),
                                 mirror_.data() + packed_[static_cast<std::size_t>(b)], l.bytes(b));
  }
  return true;
}

}  // namespace

detail::OperationPtr start_library_call(MPI_Comm comm, const Buffers& buffers, const Layout& layout,
                                        const Options& options) {
  int size = 0, rank = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_call(size, rank, buffers, layout);
  forced_choice(options, size);  // the option errors of any call (a bad radix, AGX_ALGO)
  detail::OperationPtr op(new LibraryCall(comm, rank, buffers, layout));
  detail::progress_register(op.get());
  op->start();
  return op;
}

}  // namespace agx
