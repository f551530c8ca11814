// Datatype queries, the contiguity test, and chunked pack / unpack (MPI_Pack takes
// int sizes, so large data goes in pieces of whole elements).
//
// A datatype the user hands in is checked as MPI checks it: a handle that names no
// type (freed, garbage) and one never committed are MPI_ERR_TYPE. MPI reports a bad
// handle in a datatype query through MPI_COMM_WORLD's error handler (fatal by
// default), not through the communicator of the call: the queries of a derived type
// therefore run with MPI_COMM_WORLD and MPI_COMM_SELF returning errors, and agx raises
// the class on the call's communicator. Whether a type is committed is asked of
// MPI_Pack with count 0, which both Open MPI and MPICH refuse for an uncommitted type.
// (A freed handle is a dangling pointer in Open MPI: found when the freed memory still
// reads as freed, which is what MPI_Type_get_envelope sees right after the free.)

#include "pmpi/datatype.hpp"

#include <agx/error.hpp>

#include "core/mpi_check.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

namespace agx::pmpi {
namespace {

/// describe_type without the validity checks (children of a checked type).
TypeInfo describe_valid(MPI_Datatype type);

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
    const TypeInfo c = describe_valid(child);  // a child need not be committed
    const std::int64_t count = combiner == MPI_COMBINER_CONTIGUOUS ? ints[0] : 1;
    ok = is_contiguous(c, count);
  } catch (...) {
    free_if_derived(child);
    throw;
  }
  free_if_derived(child);
  return ok;
}

/// `comm` returns errors while this lives (datatype queries report on MPI_COMM_WORLD,
/// MPI_Pack on the communicator it is given).
class ReturnsErrors {
 public:
  explicit ReturnsErrors(MPI_Comm comm) : comm_(comm) {
    if (PMPI_Comm_get_errhandler(comm_, &saved_) != MPI_SUCCESS) return;
    swapped_ = PMPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN) == MPI_SUCCESS;
  }
  ~ReturnsErrors() {
    if (swapped_) PMPI_Comm_set_errhandler(comm_, saved_);
    if (saved_ != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&saved_);
  }
  ReturnsErrors(const ReturnsErrors&) = delete;
  ReturnsErrors& operator=(const ReturnsErrors&) = delete;

 private:
  MPI_Comm comm_;
  MPI_Errhandler saved_ = MPI_ERRHANDLER_NULL;
  bool swapped_ = false;
};

constexpr std::int64_t chunk_elements(const TypeInfo& t) {
  return t.size > 0 && t.size < INT_MAX ? INT_MAX / t.size : 1;
}

TypeInfo describe_valid(MPI_Datatype type) {
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

}  // namespace

bool is_common_predefined(MPI_Datatype t) {
  const MPI_Datatype common[] = {
      MPI_BYTE,         MPI_CHAR,          MPI_SIGNED_CHAR,   MPI_UNSIGNED_CHAR, MPI_SHORT,
      MPI_UNSIGNED_SHORT, MPI_INT,         MPI_UNSIGNED,      MPI_LONG,          MPI_UNSIGNED_LONG,
      MPI_LONG_LONG,    MPI_UNSIGNED_LONG_LONG, MPI_FLOAT,    MPI_DOUBLE,        MPI_LONG_DOUBLE,
      MPI_INT8_T,       MPI_INT16_T,       MPI_INT32_T,       MPI_INT64_T,       MPI_UINT8_T,
      MPI_UINT16_T,     MPI_UINT32_T,      MPI_UINT64_T,      MPI_C_BOOL,        MPI_PACKED,
      MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX};
  for (MPI_Datatype c : common)
    if (t == c) return true;
  return false;
}


TypeInfo describe_type(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) throw Error(MPI_ERR_TYPE, "agx: datatype is MPI_DATATYPE_NULL");
  if (is_common_predefined(type)) return describe_valid(type);
  const ReturnsErrors world(MPI_COMM_WORLD), self(MPI_COMM_SELF);
  int ni = 0, na = 0, nd = 0, combiner = MPI_COMBINER_NAMED;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
    throw Error(MPI_ERR_TYPE, "agx: the datatype handle names no datatype (freed, or never "
                              "created)");
  if (combiner != MPI_COMBINER_NAMED) {
    char scratch[1] = {};
    int position = 0;
    if (PMPI_Pack(scratch, 0, type, scratch, sizeof scratch, &position, MPI_COMM_SELF) !=
        MPI_SUCCESS)
      throw Error(MPI_ERR_TYPE, "agx: the datatype is not committed (MPI_Type_commit it before "
                                "communicating with it)");
  }
  try {
    return describe_valid(type);
  } catch (const Error& e) {  // a handle MPI half recognises
    throw Error(MPI_ERR_TYPE, std::string("agx: the datatype is not valid: ") + e.what());
  }
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

namespace {

/// A committed type of `bytes` contiguous bytes, for any size: MiB pieces and a rest.
MPI_Datatype byte_run_type(std::int64_t bytes) {
  constexpr std::int64_t piece = std::int64_t{1} << 20;
  MPI_Datatype mib = MPI_DATATYPE_NULL, pieces = MPI_DATATYPE_NULL, run = MPI_DATATYPE_NULL;
  check_mpi(PMPI_Type_contiguous(static_cast<int>(piece), MPI_BYTE, &mib), "MPI_Type_contiguous");
  check_mpi(PMPI_Type_contiguous(static_cast<int>(bytes / piece), mib, &pieces),
            "MPI_Type_contiguous");
  int lengths[2] = {1, static_cast<int>(bytes % piece)};
  MPI_Aint at[2] = {0, static_cast<MPI_Aint>(bytes / piece * piece)};
  MPI_Datatype parts[2] = {pieces, MPI_BYTE};
  check_mpi(PMPI_Type_create_struct(2, lengths, at, parts, &run), "MPI_Type_create_struct");
  check_mpi(PMPI_Type_commit(&run), "MPI_Type_commit");
  PMPI_Type_free(&mib);
  PMPI_Type_free(&pieces);
  return run;
}

/// MPI_COMM_SELF's private twin (no user message can match agx's).
MPI_Comm self_twin() {
  static const MPI_Comm twin = [] {
    MPI_Comm c = MPI_COMM_NULL;
    check_mpi(PMPI_Comm_split(MPI_COMM_SELF, 0, 0, &c), "MPI_Comm_split");
    check_mpi(PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    return c;
  }();
  return twin;
}

/// Packs (to_packed) or unpacks `count` elements of `t`, each larger than INT_MAX
/// bytes, which MPI_Pack's int sizes cannot describe: one message per element to this
/// rank itself, the element's type map on one side and a run of bytes on the other
/// (MPI libraries move such messages; MPI_Pack_c is MPI-4.0 only).
void move_big_elements(const void* user, std::int64_t count, const TypeInfo& t, std::byte* packed,
                       bool to_packed) {
  MPI_Datatype run = byte_run_type(t.size);
  try {
    for (std::int64_t e = 0; e < count; ++e) {
      char* elem = const_cast<char*>(static_cast<const char*>(user)) + e * t.extent;
      std::byte* bytes = packed + e * t.size;
      if (to_packed)
        check_mpi(PMPI_Sendrecv(elem, 1, t.type, 0, 0, bytes, 1, run, 0, 0, self_twin(),
                                MPI_STATUS_IGNORE),
                  "MPI_Sendrecv");
      else
        check_mpi(PMPI_Sendrecv(bytes, 1, run, 0, 0, elem, 1, t.type, 0, 0, self_twin(),
                                MPI_STATUS_IGNORE),
                  "MPI_Sendrecv");
    }
  } catch (...) {
    PMPI_Type_free(&run);
    throw;
  }
  PMPI_Type_free(&run);
}

}  // namespace

void pack(const void* buf, std::int64_t count, const TypeInfo& t, std::byte* out, MPI_Comm comm) {
  if (t.size > INT_MAX) return move_big_elements(buf, count, t, out, true);
  const std::int64_t step = chunk_elements(t);
  for (std::int64_t first = 0; first < count; first += step) {
    const std::int64_t n = std::min(step, count - first);
    const auto* in = static_cast<const char*>(buf) + first * t.extent;
    const std::int64_t want = n * t.size;
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
  if (t.size > INT_MAX) return move_big_elements(buf, count, t, const_cast<std::byte*>(in), false);
  const std::int64_t step = chunk_elements(t);
  for (std::int64_t first = 0; first < count; first += step) {
    const std::int64_t n = std::min(step, count - first);
    auto* dst = static_cast<char*>(buf) + first * t.extent;
    const std::int64_t have = n * t.size;
    int position = 0;
    check_mpi(PMPI_Unpack(in + first * t.size, static_cast<int>(have), &position, dst,
                          static_cast<int>(n), t.type, comm),
              "MPI_Unpack");
  }
}

}  // namespace agx::pmpi
