#pragma once
// CUDA runtime errors become agx::Error (only the .cu files include this).

#include <cuda_runtime.h>

#include <agx/error.hpp>

#include <string>

namespace agx::cuda {

/// Throws agx::Error (MPI_ERR_OTHER) with the CUDA error text when `e` failed; the
/// runtime's last error is cleared first, so one failure is reported once.
inline void check_cuda(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(MPI_ERR_OTHER, std::string("agx: ") + call + " failed: " + cudaGetErrorString(e));
}

}  // namespace agx::cuda
