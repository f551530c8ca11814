// raise_error: one MPI error class through the communicator's error handler.

#include "pmpi/raise.hpp"

#include "pmpi/settings.hpp"

#include <cstdio>

namespace agx::pmpi {
namespace {

bool is_fatal(MPI_Errhandler eh) {
  if (eh == MPI_ERRORS_ARE_FATAL) return true;
#ifdef MPI_ERRORS_ABORT
  if (eh == MPI_ERRORS_ABORT) return true;
#endif
  return false;
}

}  // namespace

int raise_error(MPI_Comm comm, int error_class, const std::string& message) {
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  const bool have_handler = PMPI_Comm_get_errhandler(comm, &eh) == MPI_SUCCESS;
  const bool fatal = have_handler && is_fatal(eh);
  if (have_handler && eh != MPI_ERRORS_RETURN && !fatal) PMPI_Errhandler_free(&eh);
  if (fatal || verbose()) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
  }
  PMPI_Comm_call_errhandler(comm, error_class);
  return error_class;
}

}  // namespace agx::pmpi
