#pragma once
// One intercepted all-gather, C or Fortran, blocking or not: decides whether agx
// takes it, checks it as MPI would, turns datatypes into byte layouts (packing
// what is not contiguous), picks the algorithm and runs libagx.

#include <mpi.h>

#include <agx/bytes.hpp>
#include <agx/encoded.hpp>
#include <agx/options.hpp>

#include "pmpi/datatype.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace agx::pmpi {

/// The arguments of MPI_Allgather (recvcount) or MPI_Allgatherv (recvcounts, displs).
struct GatherCall {
  const char* function = "MPI_Allgather";
  const void* sendbuf = nullptr;
  int sendcount = 0;
  MPI_Datatype sendtype = MPI_DATATYPE_NULL;
  void* recvbuf = nullptr;
  MPI_Datatype recvtype = MPI_DATATYPE_NULL;
  int recvcount = 0;                ///< MPI_Allgather
  bool is_v = false;                ///< MPI_Allgatherv: recvcounts and displs below
  const int* recvcounts = nullptr;
  const int* displs = nullptr;
  MPI_Comm comm = MPI_COMM_NULL;
};

/// The arguments of an MPI_Allgather-like call.
inline GatherCall plain_call(const char* function, const void* sendbuf, int sendcount,
                             MPI_Datatype sendtype, void* recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm) {
  GatherCall c;
  c.function = function;
  c.sendbuf = sendbuf;
  c.sendcount = sendcount;
  c.sendtype = sendtype;
  c.recvbuf = recvbuf;
  c.recvcount = recvcount;
  c.recvtype = recvtype;
  c.comm = comm;
  return c;
}

/// The arguments of an MPI_Allgatherv-like call.
inline GatherCall varying_call(const char* function, const void* sendbuf, int sendcount,
                               MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                               const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  GatherCall c = plain_call(function, sendbuf, sendcount, sendtype, recvbuf, 0, recvtype, comm);
  c.is_v = true;
  c.recvcounts = recvcounts;
  c.displs = displs;
  return c;
}

/// Whether [a, a + na) and [b, b + nb) share a byte (empty ranges share none).
inline bool ranges_overlap(const char* a, std::size_t na, const char* b, std::size_t nb) {
  return na > 0 && nb > 0 && a < b + nb && b < a + na;
}

/// Element counts, displacements and byte sizes of every block, checked.
struct Blocks {
  std::vector<std::int64_t> counts, displs;
  std::vector<std::size_t> bytes;
  std::size_t total_bytes = 0;
};

using Bytes = std::unique_ptr<std::byte[]>;

/// A call checked as MPI would check it and turned into bytes: the layout, the
/// buffers libagx moves, and the temporaries for datatypes that are not contiguous.
/// Made once per blocking call, once per persistent request; a nonblocking call's is
/// reused (pmpi/pending.cpp: prepare() again, its vectors keep their capacity).
/// Throws agx::Error with the MPI class for bad arguments.
struct PreparedCall {
  explicit PreparedCall(const GatherCall& call);
  PreparedCall(const PreparedCall&) = delete;
  PreparedCall& operator=(const PreparedCall&) = delete;

  /// Checks and turns `call` into bytes anew (what the constructor does): no allocation
  /// where the blocks are no more than before and the datatypes are contiguous.
  void prepare(const GatherCall& call);

  /// Packs what is not contiguous (the send data; in place, the own block) into the
  /// temporaries: before every start, as the user's data may have changed.
  void stage_in() const;
  /// Unpacks a non-contiguous receive into the user's buffer: after every completion.
  void stage_out() const;

  GatherCall c;
  std::size_t me = 0;          ///< this rank in c.comm
  bool user_in_place = false;  ///< sendbuf was MPI_IN_PLACE
  bool recv_direct = true;     ///< agx writes straight into the user's receive buffer
  TypeInfo st, rt;
  Blocks b;
  std::vector<std::size_t> offsets;  ///< of each block in the buffer libagx writes
  Bytes send_tmp, recv_tmp;          ///< packed send data, packed receive data
  Layout layout;                     ///< points into b.bytes and offsets
  Buffers buffers;
};

/// The algorithm of a blocking call: AGX_ALGO when it can serve (else one warning
/// and the automatic choice).
AlgorithmChoice pick_algorithm(const PreparedCall& p);
/// The options of a nonblocking or persistent start: a usable AGX_ALGO, else
/// automatic (libagx then picks a point-to-point schedule that runs in pieces).
Options pick_nonblocking_options(const PreparedCall& p);

/// AGX_COMPRESS for MPI_Iallgather(v) (docs/interposer.md): starts the call as a
/// nonblocking lossless encoded all-gather where a blocking call would run encoded (host
/// blocks, the largest of at least AGX_COMPRESS_MIN_BYTES) and the start needs no
/// agreement with the other ranks: no rank of the communicator sees a GPU (cuda::host_only)
/// and the rule's packer is known (codec::packer_known_locally). nullopt otherwise (the
/// plain nonblocking call). The same decision on every rank; counted by
/// agx_pmpi_encoded_calls.
std::optional<EncodedRequest> start_compressed(const PreparedCall& p, const Options& options);

/// Marks the calling thread as inside agx for its lifetime: MPI calls agx makes
/// itself (MPI_Allgather in topology discovery, MPI_Waitall in the executor) then go
/// straight to the MPI library.
class InsideAgx {
 public:
  InsideAgx();
  ~InsideAgx();
  InsideAgx(const InsideAgx&) = delete;
  InsideAgx& operator=(const InsideAgx&) = delete;

 private:
  bool was_inside_;
};
/// Whether the calling thread is inside agx.
bool inside_agx();

/// Whether agx serves `function` on `comm`: AGX_DISABLE unset, MPI initialized and
/// not finalized, and `comm` a valid intra-communicator. The answer is the same on
/// every rank of `comm`, so all of them take the same path. Counts and (with
/// AGX_VERBOSE) reports the calls it declines.
bool agx_serves(MPI_Comm comm, const char* function);

/// Whether a nonblocking or persistent call on `comm` (which agx serves) finds the
/// communicator set up. agx sets a communicator up collectively, so only inside a
/// blocking call: a nonblocking start must not wait for the other ranks (MPI lets a
/// rank start MPI_Iallgather and then block in a send to a rank that has not started
/// it yet). Until the first blocking all-gather on `comm`, its nonblocking calls go
/// to the MPI library (counted and, with AGX_VERBOSE, said once). Same answer on
/// every rank.
bool ready_for_nonblocking(MPI_Comm comm, const char* function);

/// Runs a call agx serves. Returns MPI_SUCCESS or an MPI error class that has
/// already gone through the communicator's error handler. Never throws.
int run_gather(const GatherCall& call) noexcept;

}  // namespace agx::pmpi
