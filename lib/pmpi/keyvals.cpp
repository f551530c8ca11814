// Attribute keys the program makes: whether a nonblocking start may set its
// communicator up by MPI_Comm_idup (api/context.hpp, SetupInFlight), which copies the
// user's attributes. It may while no key with a copy callback other than
// MPI_COMM_NULL_COPY_FN exists in the process, since then MPI_Comm_idup runs no user
// callback now (copy) or later (the delete callbacks of what it copied). The interposer
// sees every key a C program makes (MPI_Comm_create_keyval, MPI_Keyval_create); it does
// not see the Fortran bindings' own, so a process that has loaded the MPI library's
// Fortran bindings keeps the rule of before: a nonblocking call on a communicator with no
// blocking all-gather so far is the MPI library's (docs/interposer.md).

#include <mpi.h>

#include "api/context.hpp"

#include <dlfcn.h>

#include <atomic>

namespace agx::pmpi {
namespace {

std::atomic<bool> user_copy_keys{false};

// Whether the MPI library's Fortran bindings are in this process (Open MPI's
// libmpi_mpifh, which mpif.h, `use mpi` and `use mpi_f08` programs all load; MPICH's
// libmpifort).
bool fortran_loaded() {
  for (const char* name : {"libmpi_mpifh.so.40", "libmpi_mpifh.so", "libmpifort.so.12", "libmpifort.so"})
    if (void* h = dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) {
      dlclose(h);
      return true;
    }
  return false;
}

// At load (the program's libraries are all loaded by then).
[[gnu::constructor]] void decide_at_load() { allow_nonblocking_set_up(!fortran_loaded()); }

}  // namespace

void note_copy_callback() {
  user_copy_keys.store(true);
  allow_nonblocking_set_up(false);
}

}  // namespace agx::pmpi

extern "C" {

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* copy, MPI_Comm_delete_attr_function* del,
                           int* keyval, void* extra) {
  if (copy != MPI_COMM_NULL_COPY_FN) agx::pmpi::note_copy_callback();
  return PMPI_Comm_create_keyval(copy, del, keyval, extra);
}

// MPI-1's form, deprecated (both libraries still declare and offer it).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
int MPI_Keyval_create(MPI_Copy_function* copy, MPI_Delete_function* del, int* keyval, void* extra) {
  if (copy != MPI_NULL_COPY_FN) agx::pmpi::note_copy_callback();
  return PMPI_Keyval_create(copy, del, keyval, extra);
}
#pragma GCC diagnostic pop

}  // extern "C"
