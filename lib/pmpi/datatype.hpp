#pragma once
// MPI datatypes seen as bytes. A (type, count) pair is "contiguous" when its data
// is one run of bytes in type-map order: then agx moves it straight from the
// user's buffer. Everything else is packed into (or unpacked from) a contiguous
// temporary with MPI_Pack / MPI_Unpack, whose output on one machine is the type
// signature's bytes in order, the same bytes a contiguous peer sends.

#include <mpi.h>

#include <cstddef>
#include <cstdint>

namespace agx::pmpi {

struct TypeInfo {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::int64_t size = 0;     ///< bytes of data in one element
  MPI_Aint extent = 0;       ///< stride between elements
  MPI_Aint true_lb = 0;      ///< first data byte, relative to the buffer
  MPI_Aint true_extent = 0;  ///< span of the data of one element
  bool simple = false;       ///< built only from named/dup/contiguous/resized, in order
};

/// True for the predefined types programs pass most (MPI_BYTE, MPI_INT, MPI_DOUBLE, ...):
/// valid and committed by definition, and a handle that equals one is that type for the
/// whole job (predefined handles are never freed).
bool is_common_predefined(MPI_Datatype t);

/// Describes a committed datatype; throws agx::Error(MPI_ERR_TYPE) for MPI_DATATYPE_NULL.
TypeInfo describe_type(MPI_Datatype type);

/// True when `count` elements of `t` are one run of size*count bytes starting at
/// buffer + true_lb, in type-map order (also true when there is no data at all).
bool is_contiguous(const TypeInfo& t, std::int64_t count);

/// count * t.size, or agx::Error(MPI_ERR_COUNT) when negative or overflowing.
std::size_t data_bytes(const TypeInfo& t, std::int64_t count, const char* what);

/// Packs `count` elements at `buf` into out[0, count*size).
void pack(const void* buf, std::int64_t count, const TypeInfo& t, std::byte* out, MPI_Comm comm);

/// Unpacks in[0, count*size) into `count` elements at `buf`; writes nothing else.
void unpack(const std::byte* in, void* buf, std::int64_t count, const TypeInfo& t, MPI_Comm comm);

}  // namespace agx::pmpi
