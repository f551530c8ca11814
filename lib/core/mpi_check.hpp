#pragma once
// The one place where MPI return codes become agx::Error.

#include <mpi.h>

#include <agx/error.hpp>

#include <string>

namespace agx {

/// Throws agx::Error with the MPI error class and MPI_Error_string text when rc fails.
inline void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  int error_class = MPI_ERR_OTHER;
  MPI_Error_class(rc, &error_class);
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(error_class, std::string("agx: ") + call + " failed: " + std::string(text, len));
}

}  // namespace agx
