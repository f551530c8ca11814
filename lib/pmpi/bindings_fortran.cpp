// The Fortran entry points (mpif.h and `use mpi`) of MPI_ALLGATHER, MPI_ALLGATHERV,
// MPI_IALLGATHER, MPI_IALLGATHERV and MPI_FINALIZE, in every name mangling the MPI
// libraries export: mpi_x, mpi_x_, mpi_x__ and MPI_X. They convert handles with the
// f2c functions and the Fortran MPI_IN_PLACE / MPI_BOTTOM sentinels to the C ones,
// then share the C code path. The pmpi_x forms are left to the MPI library: they
// are the profiling interface and must reach MPI itself.
//
// Sentinels: Open MPI's Fortran MPI_IN_PLACE is the address of a common block
// (mpi_fortran_in_place_ in libmpi); MPICH's is kept in MPIR_F_MPI_IN_PLACE, set by
// the Fortran MPI_INIT. Both are looked up at run time, so one source fits both.

#include "pmpi/bindings.hpp"

#include <dlfcn.h>

#include <array>
#include <type_traits>
#include <vector>

namespace agx::pmpi {
namespace {

void* lookup(const char* name) { return dlsym(RTLD_DEFAULT, name); }

struct FortranSentinels {
  std::array<void*, 5> in_place{};  // addresses that are MPI_IN_PLACE
  std::array<void*, 5> bottom{};    // addresses that are MPI_BOTTOM
  void** mpich_in_place = nullptr;  // MPICH: variables holding the address
  void** mpich_bottom = nullptr;
  int* mpich_need_init = nullptr;   // MPICH: set until the Fortran constants are known
  void (*mpich_init)() = nullptr;
};

const FortranSentinels& sentinels() {
  static const FortranSentinels s = [] {
    FortranSentinels f;
    f.in_place = {lookup("mpi_fortran_in_place_"), lookup("mpi_fortran_in_place"),
                  lookup("mpi_fortran_in_place__"), lookup("MPI_FORTRAN_IN_PLACE"),
                  lookup("MPIR_F08_MPI_IN_PLACE")};
    f.bottom = {lookup("mpi_fortran_bottom_"), lookup("mpi_fortran_bottom"),
                lookup("mpi_fortran_bottom__"), lookup("MPI_FORTRAN_BOTTOM"),
                lookup("MPIR_F08_MPI_BOTTOM")};
    f.mpich_in_place = static_cast<void**>(lookup("MPIR_F_MPI_IN_PLACE"));
    f.mpich_bottom = static_cast<void**>(lookup("MPIR_F_MPI_BOTTOM"));
    f.mpich_need_init = static_cast<int*>(lookup("MPIR_F_NeedInit"));
    f.mpich_init = reinterpret_cast<void (*)()>(lookup("mpirinitf_"));
    return f;
  }();
  // MPICH's own wrappers do this too, for programs that initialized MPI from C.
  if (s.mpich_need_init != nullptr && *s.mpich_need_init != 0 && s.mpich_init != nullptr) {
    s.mpich_init();
    *s.mpich_need_init = 0;
  }
  return s;
}

bool is_one_of(const void* p, const std::array<void*, 5>& candidates, void** variable) {
  if (p == nullptr) return false;
  for (void* c : candidates)
    if (c != nullptr && p == c) return true;
  return variable != nullptr && *variable != nullptr && p == *variable;
}

/// A Fortran choice buffer as C sees it: MPI_IN_PLACE (where allowed), MPI_BOTTOM, or itself.
void* c_buffer(void* p, bool in_place_allowed) {
  const FortranSentinels& s = sentinels();
  if (in_place_allowed && is_one_of(p, s.in_place, s.mpich_in_place)) return MPI_IN_PLACE;
  if (is_one_of(p, s.bottom, s.mpich_bottom)) return MPI_BOTTOM;
  return p;
}

/// Fortran integer arrays as int arrays (a copy only when MPI_Fint is not int).
struct IntArray {
  std::vector<int> copy;
  const int* data = nullptr;
  IntArray(const MPI_Fint* f, MPI_Comm comm) {
    if constexpr (std::is_same_v<MPI_Fint, int>) {
      (void)comm;
      data = f;
    } else {
      int n = 0;
      if (f != nullptr && comm != MPI_COMM_NULL && PMPI_Comm_size(comm, &n) == MPI_SUCCESS) {
        copy.assign(f, f + n);
        data = copy.data();
      }
    }
  }
};

void set_request(MPI_Fint* request, MPI_Request c_request, int rc) {
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(c_request);
}

}  // namespace
}  // namespace agx::pmpi

using namespace agx::pmpi;

#define AGX_FORTRAN_NAMES(lower, upper)                               \
  __attribute__((alias(#lower))) decltype(lower) lower##_;            \
  __attribute__((alias(#lower))) decltype(lower) lower##__;           \
  __attribute__((alias(#lower))) decltype(lower) upper;

extern "C" {

void mpi_allgather(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                   MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = allgather(c_buffer(sendbuf, true), *sendcount, PMPI_Type_f2c(*sendtype),
                    c_buffer(recvbuf, false), *recvcount, PMPI_Type_f2c(*recvtype),
                    PMPI_Comm_f2c(*comm));
}

void mpi_allgatherv(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                    MPI_Fint* recvcounts, MPI_Fint* displs, MPI_Fint* recvtype, MPI_Fint* comm,
                    MPI_Fint* ierr) {
  const MPI_Comm c = PMPI_Comm_f2c(*comm);
  const IntArray counts(recvcounts, c), offsets(displs, c);
  *ierr = allgatherv(c_buffer(sendbuf, true), *sendcount, PMPI_Type_f2c(*sendtype),
                     c_buffer(recvbuf, false), counts.data, offsets.data,
                     PMPI_Type_f2c(*recvtype), c);
}

void mpi_iallgather(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                    MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* request,
                    MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = iallgather(c_buffer(sendbuf, true), *sendcount, PMPI_Type_f2c(*sendtype),
                     c_buffer(recvbuf, false), *recvcount, PMPI_Type_f2c(*recvtype),
                     PMPI_Comm_f2c(*comm), &r, true);
  set_request(request, r, *ierr);
}

void mpi_iallgatherv(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                     MPI_Fint* recvcounts, MPI_Fint* displs, MPI_Fint* recvtype, MPI_Fint* comm,
                     MPI_Fint* request, MPI_Fint* ierr) {
  const MPI_Comm c = PMPI_Comm_f2c(*comm);
  const IntArray counts(recvcounts, c), offsets(displs, c);
  MPI_Request r = MPI_REQUEST_NULL;
  *ierr = iallgatherv(c_buffer(sendbuf, true), *sendcount, PMPI_Type_f2c(*sendtype),
                      c_buffer(recvbuf, false), counts.data, offsets.data,
                      PMPI_Type_f2c(*recvtype), c, &r, true);
  set_request(request, r, *ierr);
}

void mpi_finalize(MPI_Fint* ierr) { *ierr = finalize(); }

AGX_FORTRAN_NAMES(mpi_allgather, MPI_ALLGATHER)
AGX_FORTRAN_NAMES(mpi_allgatherv, MPI_ALLGATHERV)
AGX_FORTRAN_NAMES(mpi_iallgather, MPI_IALLGATHER)
AGX_FORTRAN_NAMES(mpi_iallgatherv, MPI_IALLGATHERV)
AGX_FORTRAN_NAMES(mpi_finalize, MPI_FINALIZE)

}  // extern "C"
