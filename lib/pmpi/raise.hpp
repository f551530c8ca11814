#pragma once
// Errors out of the interposer: exactly as MPI reports them, through the
// communicator's error handler, never as a C++ exception.

#include <mpi.h>

#include <agx/error.hpp>

#include <exception>
#include <new>
#include <string>

namespace agx::pmpi {

/// Hands `error_class` to `comm`'s error handler (MPI_Comm_call_errhandler) and
/// returns it. With a fatal handler the message is printed first, so the abort
/// says what was wrong; with AGX_VERBOSE it is printed for every handler.
int raise_error(MPI_Comm comm, int error_class, const std::string& message);

/// Runs `body` (which returns an MPI code) and turns any exception it throws into
/// raise_error: agx::Error keeps its class, std::bad_alloc is MPI_ERR_NO_MEM,
/// anything else MPI_ERR_INTERN.
template <class Body>
int guarded(MPI_Comm comm, const char* function, Body&& body) noexcept {
  const auto where = [function] { return std::string(function) + ": "; };  // on errors only
  try {
    try {
      return body();
    } catch (const agx::Error& e) {
      return raise_error(comm, e.error_class(), where() + e.what());
    } catch (const std::bad_alloc&) {
      return raise_error(comm, MPI_ERR_NO_MEM, where() + "agx: out of memory");
    } catch (const std::exception& e) {
      return raise_error(comm, MPI_ERR_INTERN, where() + e.what());
    } catch (...) {
      return raise_error(comm, MPI_ERR_INTERN, where() + "agx: unknown internal error");
    }
  } catch (...) {  // the message itself could not be built
    return MPI_ERR_INTERN;
  }
}

}  // namespace agx::pmpi
