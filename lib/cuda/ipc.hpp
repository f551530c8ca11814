#pragma once
// One IPC call (ipc.cpp), advanced without blocking: the handle exchange, the
// agreement that every rank could open its peers' handles and the closing barrier are
// nonblocking collectives on the call's communicator, tested by test().

#include <agx/bytes.hpp>
#include <mpi.h>

#include "cuda/backend.hpp"

#include <optional>
#include <vector>

namespace agx {
class CommContext;
}

namespace agx::cuda {

class IpcCall {
 public:
  /// Puts the own block in place, records the ready event and posts the exchange.
  IpcCall(CommContext& ctx, const Buffers& buffers, const Layout& layout);
  ~IpcCall();
  IpcCall(const IpcCall&) = delete;
  IpcCall& operator=(const IpcCall&) = delete;

  /// nullopt while running; true once complete; false, on every rank, when some rank
  /// cannot take part (nothing but the own block has moved then).
  std::optional<bool> test();

 private:
  bool copy_all();

  CommContext& ctx_;
  Buffers buffers_;
  Layout layout_;
  int step_ = 0;  ///< 0: exchange, 1: agreement on the opens, 2: closing barrier
  MPI_Request request_ = MPI_REQUEST_NULL;
  backend::IpcExport mine_{};
  std::vector<backend::IpcExport> all_;
  int ok_ = 1, agreed_ = 0;
};

}  // namespace agx::cuda
