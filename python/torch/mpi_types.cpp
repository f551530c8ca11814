// torch dtypes and reduce operations for MPI (mpi_types.hpp).

#include "mpi_types.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <algorithm>

namespace agx::torch {

namespace {

// A 2-byte element MPI has no type for.
MPI_Datatype two_bytes() {
  static MPI_Datatype type = [] {
    MPI_Datatype t;
    MPI_Type_contiguous(2, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    return t;
  }();
  return type;
}

struct Sum { template <class T> T operator()(T a, T b) const { return static_cast<T>(float(a) + float(b)); } };
struct Prod { template <class T> T operator()(T a, T b) const { return static_cast<T>(float(a) * float(b)); } };
struct Min { template <class T> T operator()(T a, T b) const { return float(a) < float(b) ? a : b; } };
struct Max { template <class T> T operator()(T a, T b) const { return float(a) > float(b) ? a : b; } };

template <class T, class F>
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = F{}(a[i], b[i]);
}

template <class T>
MPI_Op half_op(c10d::ReduceOp::RedOpType op) {
  static const MPI_Op ops[4] = {
      [] { MPI_Op o; MPI_Op_create(&combine<T, Sum>, 1, &o); return o; }(),
      [] { MPI_Op o; MPI_Op_create(&combine<T, Prod>, 1, &o); return o; }(),
      [] { MPI_Op o; MPI_Op_create(&combine<T, Min>, 1, &o); return o; }(),
      [] { MPI_Op o; MPI_Op_create(&combine<T, Max>, 1, &o); return o; }(),
  };
  switch (op) {
    case c10d::ReduceOp::SUM: return ops[0];
    case c10d::ReduceOp::PRODUCT: return ops[1];
    case c10d::ReduceOp::MIN: return ops[2];
    default: return ops[3];
  }
}

const char* op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace

MPI_Datatype reduce_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kByte: return MPI_UINT8_T;
    case at::kChar: return MPI_INT8_T;
    case at::kShort: return MPI_INT16_T;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kBool: return MPI_C_BOOL;
    case at::kComplexFloat: return MPI_C_FLOAT_COMPLEX;
    case at::kComplexDouble: return MPI_C_DOUBLE_COMPLEX;
    case at::kHalf:
    case at::kBFloat16: return two_bytes();
    default:
      TORCH_CHECK_TYPE(false, "agx: reductions of ", c10::toString(type),
                       " tensors are not supported");
  }
}

MPI_Op reduce_op(const c10d::ReduceOp& reduce, at::ScalarType type, const char* what) {
  const auto op = reduce.op_;
  const bool is_float = at::isFloatingType(type), is_complex = at::isComplexType(type);
  const bool bitwise = op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR ||
                       op == c10d::ReduceOp::BXOR;
  TORCH_CHECK(op != c10d::ReduceOp::AVG && op != c10d::ReduceOp::PREMUL_SUM &&
                  op != c10d::ReduceOp::UNUSED,
              "agx: ", what, " with ReduceOp.", op_name(op),
              " is not supported (as with Gloo): use SUM and divide by the group size");
  TORCH_CHECK(!(bitwise && (is_float || is_complex)), "agx: ", what, " with ReduceOp.",
              op_name(op), " needs an integer or bool tensor, not ", c10::toString(type));
  TORCH_CHECK(!(is_complex && (op == c10d::ReduceOp::MIN || op == c10d::ReduceOp::MAX)),
              "agx: ", what, " with ReduceOp.", op_name(op), " is undefined for ",
              c10::toString(type));
  if (type == at::kHalf) return half_op<c10::Half>(op);
  if (type == at::kBFloat16) return half_op<c10::BFloat16>(op);
  if (type == at::kBool) {
    switch (op) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX:
      case c10d::ReduceOp::BOR: return MPI_LOR;
      case c10d::ReduceOp::BXOR: return MPI_LXOR;
      default: return MPI_LAND;  // PRODUCT, MIN, BAND
    }
  }
  switch (op) {
    case c10d::ReduceOp::SUM: return MPI_SUM;
    case c10d::ReduceOp::PRODUCT: return MPI_PROD;
    case c10d::ReduceOp::MIN: return MPI_MIN;
    case c10d::ReduceOp::MAX: return MPI_MAX;
    case c10d::ReduceOp::BAND: return MPI_BAND;
    case c10d::ReduceOp::BOR: return MPI_BOR;
    default: return MPI_BXOR;
  }
}

}  // namespace agx::torch
