#pragma once
// torch dtypes and reduce operations as MPI datatypes and operations, for the operations
// the agx process group hands to the MPI library (all_reduce, reduce, reduce_scatter).
// float16 and bfloat16, which MPI lacks, are 2-byte datatypes with operations of their
// own (sum, product, min, max computed in float and rounded back, as torch does).

#include <ATen/ATen.h>
#include <mpi.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace agx::torch {

/// The MPI datatype of one element of `type` for reductions; c10::Error naming the dtype
/// for one MPI cannot reduce.
MPI_Datatype reduce_type(at::ScalarType type);

/// The MPI operation for `op` on elements of `type`; c10::Error for a pair MPI cannot
/// reduce (AVG, PREMUL_SUM, bitwise operations on floating point, min/max on complex).
MPI_Op reduce_op(const c10d::ReduceOp& op, at::ScalarType type, const char* what);

}  // namespace agx::torch
