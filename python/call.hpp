#pragma once
// One checked all-gather call from Python arguments: the communicator (mpi4py), the
// arrays (buffer protocol, viewed as NumPy arrays), the layout in bytes and the options.
// Every check here runs before any communication; the byte-level entry points of libagx
// (agx/bytes.hpp, agx/request.hpp) then get the call.

#include <mpi.h>

#include <agx/bytes.hpp>
#include <agx/options.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace agx::python {

namespace py = pybind11;

/// Imports mpi4py's C API; raises the Python error when mpi4py is missing.
void import_mpi4py_api();

/// The MPI_Comm inside an mpi4py.MPI.Comm. TypeError for other objects; agx::Error
/// (MPI_ERR_COMM) for MPI.COMM_NULL or an inter-communicator, (MPI_ERR_OTHER) when MPI is
/// not initialized or already finalized.
MPI_Comm to_comm(py::handle comm);

/// Options from the `algorithm` argument: None is `auto` (AGX_ALGO applies); a string is
/// a name of agx's algorithm table (agx::Error MPI_ERR_ARG naming the known ones otherwise).
Options to_options(const std::optional<std::string>& algorithm);

/// A checked call: buffers and layout for libagx, plus the arrays it reads and writes
/// (held so that a Request or Plan keeps them alive). The arrays are py::object: a
/// default-constructed py::array would allocate an array on every call.
struct Call {
  MPI_Comm comm = MPI_COMM_NULL;
  Options options;
  Buffers buffers;
  int nranks = 0;
  std::size_t block_bytes = 0;                  // the uniform layout
  std::vector<std::size_t> bytes, offsets;      // the v layout (non-empty when used)
  py::object send = py::none();                 // None for in place
  py::object recv;                              // a NumPy array

  Layout layout() const {
    return bytes.empty() ? Layout::uniform(nranks, block_bytes) : Layout::varying(bytes, offsets);
  }
};

/// allgather(comm, send, recv=None): send None means in place (recv then holds N blocks
/// of recv.size / N elements, this rank's already at its place); recv None allocates
/// N * len(send) rows of send's dtype.
Call uniform_call(py::handle comm, py::handle send, py::handle recv,
                  const std::optional<std::string>& algorithm);

/// allgatherv(comm, send, recv, counts, displs=None): counts and displacements in
/// elements of the dtype; displs None packs the blocks in rank order; send None means in
/// place; recv None allocates a zeroed 1-d array just long enough.
Call varying_call(py::handle comm, py::handle send, py::handle recv, py::handle counts,
                  py::handle displs, const std::optional<std::string>& algorithm);

}  // namespace agx::python
