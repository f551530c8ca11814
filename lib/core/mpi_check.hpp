#pragma once
// The one place where MPI return codes become agx::Error.

#include <mpi.h>

#include <agx/error.hpp>

#include <string>
#include <vector>

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

/// check_mpi for a multiple-completion call (MPI_Waitall, MPI_Testall, MPI_Testsome)
/// that filled `statuses` (`count` of them): MPI_ERR_IN_STATUS becomes the class of
/// the first failed status, which is what a single-request call of agx must report
/// (MPI allows MPI_ERR_IN_STATUS only from multiple-request calls).
inline void check_statuses(int rc, const MPI_Status* statuses, std::size_t count, const char* call) {
  if (rc == MPI_SUCCESS) return;
  int error_class = MPI_ERR_OTHER;
  MPI_Error_class(rc, &error_class);
  if (error_class == MPI_ERR_IN_STATUS)
    for (std::size_t i = 0; i < count; ++i)
      if (statuses[i].MPI_ERROR != MPI_SUCCESS && statuses[i].MPI_ERROR != MPI_ERR_PENDING) {
        check_mpi(statuses[i].MPI_ERROR, call);
        break;
      }
  check_mpi(rc, call);
}

/// While it lives, MPI_COMM_WORLD returns errors instead of calling its handler.
/// MPICH raises the error of a completion call (MPI_Wait, MPI_Waitall, ..., e.g. a
/// truncated receive) on MPI_COMM_WORLD's handler, fatal by default, not on the
/// request's communicator: agx's completion calls run under this guard there, so that
/// agx reports the class itself through the user's communicator. (Open MPI raises on
/// the request's communicator, agx's private one, which returns errors: no guard.)
class WorldReturnsErrors {
 public:
#if defined(MPICH)
  WorldReturnsErrors() {
    if (MPI_Comm_get_errhandler(MPI_COMM_WORLD, &saved_) == MPI_SUCCESS)
      swapped_ = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS;
  }
  ~WorldReturnsErrors() {
    if (swapped_) MPI_Comm_set_errhandler(MPI_COMM_WORLD, saved_);
    if (saved_ != MPI_ERRHANDLER_NULL) MPI_Errhandler_free(&saved_);
  }
#else
  WorldReturnsErrors() {}
  ~WorldReturnsErrors() {}  // user-provided: a guard, not an unused variable
#endif
  WorldReturnsErrors(const WorldReturnsErrors&) = delete;
  WorldReturnsErrors& operator=(const WorldReturnsErrors&) = delete;

 private:
#if defined(MPICH)
  MPI_Errhandler saved_ = MPI_ERRHANDLER_NULL;
  bool swapped_ = false;
#endif
};

/// Room for the statuses of `count` requests.
inline MPI_Status* statuses_for(std::vector<MPI_Status>& v, std::size_t count) {
  if (v.size() < count) v.resize(count);
  return v.data();
}

}  // namespace agx
