// MPI_Keyval_create, MPI-1's form of MPI_Comm_create_keyval (keyvals.cpp), which newer
// mpi.h files no longer declare: taken without mpi.h, with the same arguments, and handed
// to the MPI library's own. A key made this way with a copy callback other than
// MPI_NULL_COPY_FN (a null pointer in both libraries' ABIs, checked against the
// library's symbol where it has one) keeps nonblocking starts from MPI_Comm_idup.

#include <dlfcn.h>

namespace agx::pmpi {
void note_copy_callback();
}

extern "C" int MPI_Keyval_create(void* copy, void* del, int* keyval, void* extra) {
  using Create = int (*)(void*, void*, int*, void*);
  static const auto real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "MPI_Keyval_create"));
  // MPI_NULL_COPY_FN: Open MPI's OMPI_C_MPI_NULL_COPY_FN, MPICH's a null pointer
  static void* const null_copy = dlsym(RTLD_DEFAULT, "OMPI_C_MPI_NULL_COPY_FN");
  if (copy != nullptr && copy != null_copy) agx::pmpi::note_copy_callback();
  return real != nullptr ? real(copy, del, keyval, extra) : 16;  // (MPI_ERR_OTHER's usual value)
}
