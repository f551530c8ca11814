// Datatype queries, the contiguity test, and chunked pack / unpack (MPI_Pack takes
// int sizes, so large data goes in pieces of whole elements).

#include "pmpi/datatype.hpp"

#include <agx/error.hpp>

#include "core/mpi_check.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

namespace agx::pmpi {
namespace {

/// Frees a type handle returned by MPI_Type_get_contents unless it is predefined.
void free_if_derived(MPI_Datatype& t) {
  int ni = 0, na = 0, nd = 0, combiner = MPI_COMBINER_NAMED;
  if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) == MPI_SUCCESS &&
      combiner != MPI_COMBINER_NAMED)
    PMPI_Type_free(&t);
}

/// True when the type is built from named types only through dup, contiguous and
/// resized, each of whose children is itself contiguous: then its type map runs in
/// memory order. Anything else (vector, indexed, struct, ...) counts as not simple,
/// which only costs a pack.
bool is_simple(MPI_Datatype type) {
  int ni = 0, na = 0, nd = 0, combiner = MPI_COMBINER_NAMED;
  check_mpi(PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner), "MPI_Type_get_envelope");
  if (combiner == MPI_COMBINER_NAMED) return true;
  if (combiner != MPI_COMBINER_DUP && combiner != MPI_COMBINER_CONTIGUOUS &&
      combiner != MPI_COMBINER_RESIZED)
    return false;
  std::vector<int> ints(static_cast<std::size_t>(ni) + 1);
  std::vector<MPI_Aint> addrs(static_cast<std::size_t>(na) + 1);
  std::vector<MPI_Datatype> types(static_cast<std::size_t>(nd) + 1, MPI_DATATYPE_NULL);
  check_mpi(PMPI_Type_get_contents(type, ni, na, nd, ints.data(), addrs.data(), types.data()),
            "MPI_Type_get_contents");
  if (nd != 1) {
    for (int i = 0; i < nd; ++i) free_if_derived(types[static_cast<std::size_t>(i)]);
    return false;
  }
  MPI_Datatype child = types[0];
  bool ok = false;
  try {
    const TypeInfo c = describe_type(child);
    const std::int64_t count = combiner == MPI_COMBINER_CONTIGUOUS ? ints[0] : 1;
    ok = is_contiguous(c, count);
  } catch (...) {
    free_if_derived(child);
    throw;
  }
  free_if_derived(child);
  return ok;
}

constexpr std::int64_t chunk_elements(const TypeInfo& t) {
  return t.size > 0 && t.size < INT_MAX ? INT_MAX / t.size : 1;
}

}  // namespace

TypeInfo describe_type(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) throw Error(MPI_ERR_TYPE, "agx: datatype is MPI_DATATYPE_NULL");
  TypeInfo t;
  t.type = type;
  MPI_Count size = 0;
  MPI_Aint lb = 0;
  check_mpi(PMPI_Type_size_x(type, &size), "MPI_Type_size_x");
  check_mpi(PMPI_Type_get_extent(type, &lb, &t.extent), "MPI_Type_get_extent");
  check_mpi(PMPI_Type_get_true_extent(type, &t.true_lb, &t.true_extent),
            "MPI_Type_get_true_extent");
  t.size = static_cast<std::int64_t>(size);
  t.simple = is_simple(type);
  return t;
}

bool is_contiguous(const TypeInfo& t, std::int64_t count) {
  if (count == 0 || t.size == 0) return true;
  if (t.size != t.true_extent) return false;
  if (count > 1 && t.extent != t.size) return false;
  return t.simple;
}

std::size_t data_bytes(const TypeInfo& t, std::int64_t count, const char* what) {
  if (count < 0) throw Error(MPI_ERR_COUNT, std::string("agx: negative ") + what);
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(count, t.size, &bytes))
    throw Error(MPI_ERR_COUNT, std::string("agx: ") + what + " overflows the byte size");
  return static_cast<std::size_t>(bytes);
}

void pack(const void* buf, std::int64_t count, const TypeInfo& t, std::byte* out, MPI_Comm comm) {
  const std::int64_t step = chunk_elements(t);
  for (std::int64_t first = 0; first < count; first += step) {
    const std::int64_t n = std::min(step, count - first);
    const auto* in = static_cast<const char*>(buf) + first * t.extent;
    const std::int64_t want = n * t.size;
    if (want > INT_MAX) throw Error(MPI_ERR_COUNT, "agx: one datatype element exceeds 2 GiB");
    int position = 0;
    check_mpi(PMPI_Pack(in, static_cast<int>(n), t.type, out + first * t.size,
                        static_cast<int>(want), &position, comm),
              "MPI_Pack");
    if (position != want)
      throw Error(MPI_ERR_INTERN, "agx: MPI_Pack wrote " + std::to_string(position) +
                                      " bytes, expected " + std::to_string(want) +
                                      " (non-native pack format; run with AGX_DISABLE=1)");
  }
}

void unpack(const std::byte* in, void* buf, std::int64_t count, const TypeInfo& t, MPI_Comm comm) {
  const std::int64_t step = chunk_elements(t);
  for (std::int64_t first = 0; first < count; first += step) {
    const std::int64_t n = std::min(step, count - first);
    auto* dst = static_cast<char*>(buf) + first * t.extent;
    const std::int64_t have = n * t.size;
    if (have > INT_MAX) throw Error(MPI_ERR_COUNT, "agx: one datatype element exceeds 2 GiB");
    int position = 0;
    check_mpi(PMPI_Unpack(in + first * t.size, static_cast<int>(have), &position, dst,
                          static_cast<int>(n), t.type, comm),
              "MPI_Unpack");
  }
}

}  // namespace agx::pmpi
