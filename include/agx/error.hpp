#pragma once
// agx::Error: an MPI error class plus a readable message.

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace agx {

/// Thrown by every agx C++ entry point. `error_class()` is an MPI error class
/// (MPI_ERR_COUNT, MPI_ERR_BUFFER, MPI_ERR_ARG, ...), so callers can map it back to MPI.
class Error : public std::runtime_error {
 public:
  Error(int mpi_error_class, const std::string& message)
      : std::runtime_error(message), error_class_(mpi_error_class) {}

  /// The MPI error class of this error.
  int error_class() const noexcept { return error_class_; }

 private:
  int error_class_;
};

}  // namespace agx
