// Python arguments to a checked agx call (call.hpp).

#include "call.hpp"

#include "core/mpi_check.hpp"

#include <agx/algorithm.hpp>
#include <agx/error.hpp>

#include <mpi4py/mpi4py.h>

#include <limits>

namespace agx::python {

namespace {

// In place: `send` is None, or mpi4py's MPI.IN_PLACE (an mpi4py.MPI.InPlace), which an
// mpi4py user writes first; recognised by its type, so that agx needs no mpi4py import.
bool is_in_place(py::handle send) {
  if (send.is_none()) return true;
  const py::handle type = py::type::handle_of(send);
  return py::str(type.attr("__name__")).cast<std::string>() == "InPlace" &&
         py::str(type.attr("__module__")).cast<std::string>() == "mpi4py.MPI";
}

/// str(obj) in Python.
std::string text(py::handle obj) { return py::str(obj).cast<std::string>(); }

std::string type_name(py::handle obj) { return text(py::type::handle_of(obj).attr("__name__")); }

int comm_size(MPI_Comm comm) {
  int n = 0;
  check_mpi(MPI_Comm_size(comm, &n), "MPI_Comm_size");
  return n;
}

int comm_rank(MPI_Comm comm) {
  int r = 0;
  check_mpi(MPI_Comm_rank(comm, &r), "MPI_Comm_rank");
  return r;
}

/// `obj` as a NumPy array without a copy: an ndarray itself, or a view of any object
/// with the buffer protocol. Rejects what agx cannot move as bytes.
py::array view_of(py::handle obj, const char* what) {
  if (py::isinstance<py::array>(obj)) return py::reinterpret_borrow<py::array>(obj);
  if (PyObject_CheckBuffer(obj.ptr())) {
    // Through a memoryview: NumPy reads bytes objects as string scalars otherwise.
    auto view = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(obj.ptr()));
    if (!view) throw py::error_already_set();
    py::array a = py::array::ensure(view);
    if (!a) throw py::type_error(std::string("agx: ") + what + " (" + type_name(obj) +
                                 ") exports a buffer NumPy cannot view");
    return a;
  }
  throw py::type_error(std::string("agx: ") + what + " must support the buffer protocol " +
                       "(a NumPy array, bytearray, memoryview, array.array...), got " +
                       type_name(obj));
}

constexpr char npy_item_hasobject = 0x01;  // NPY_ITEM_HASOBJECT of numpy/ndarraytypes.h

/// `obj` as a NumPy array without a copy: an ndarray itself, or a view of any object
/// with the buffer protocol. Rejects what agx cannot move as bytes.
py::array as_array(py::handle obj, const char* what, bool writable) {
  py::array a = view_of(obj, what);
  if ((a.dtype().flags() & npy_item_hasobject) != 0)
    throw py::type_error(std::string("agx: ") + what + " has dtype " +
                         text(a.dtype()) +
                         ", which holds Python object references; agx gathers plain bytes");
  if ((a.flags() & py::array::c_style) == 0)
    throw py::value_error(std::string("agx: ") + what + " is not C-contiguous (shape " +
                          text(a.attr("shape")) + ", strides " +
                          text(a.attr("strides")) +
                          "); pass numpy.ascontiguousarray(" + what + ")");
  if (writable && !a.writeable())
    throw py::value_error(std::string("agx: ") + what + " is read-only");
  return a;
}

void check_same_dtype(const py::array& send, const py::array& recv) {
  const py::dtype s = send.dtype(), r = recv.dtype();
  if (s.ptr() == r.ptr()) return;
  const int equal = PyObject_RichCompareBool(s.ptr(), r.ptr(), Py_EQ);
  if (equal < 0) throw py::error_already_set();
  if (equal == 0)
    throw Error(MPI_ERR_TYPE, "agx: send has dtype " + text(s) +
                                  " but recv has dtype " + text(r));
}

void check_no_overlap(const py::array& send, const py::array& recv) {
  if (send.nbytes() == 0 || recv.nbytes() == 0) return;
  const auto* s0 = static_cast<const char*>(send.data());
  const auto* r0 = static_cast<const char*>(recv.data());
  if (s0 < r0 + recv.nbytes() && r0 < s0 + send.nbytes())
    throw Error(MPI_ERR_BUFFER,
                "agx: send and recv overlap; for in place pass send=None with the own block in recv");
}

std::size_t checked_product(std::size_t a, std::size_t b, const char* what) {
  std::size_t p = 0;
  if (__builtin_mul_overflow(a, b, &p) ||
      p > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()))
    throw Error(MPI_ERR_COUNT, std::string("agx: ") + what + " overflows the byte size");
  return p;
}

/// N * len(send) rows of send's dtype (a 0-d send counts as one row of one element).
py::array allocate_rows(const py::array& send, std::size_t n) {
  std::vector<py::ssize_t> shape(send.shape(), send.shape() + send.ndim());
  if (shape.empty()) shape.push_back(1);
  shape[0] *= static_cast<py::ssize_t>(n);
  return py::array(send.dtype(), shape);
}

/// A sequence of Python integers (or NumPy integers) with exactly n entries.
std::vector<long long> to_integers(py::handle obj, const char* what, int n) {
  if (!py::isinstance<py::iterable>(obj))
    throw py::type_error(std::string("agx: ") + what + " must be a sequence of integers, got " +
                         type_name(obj));
  std::vector<long long> out;
  for (py::handle item : obj) {
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(item.ptr()));
    if (!index) throw py::error_already_set();  // TypeError: not an integer
    const long long v = PyLong_AsLongLong(index.ptr());
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();  // OverflowError
    out.push_back(v);
  }
  if (out.size() != static_cast<std::size_t>(n))
    throw Error(MPI_ERR_ARG, std::string("agx: ") + what + " has " + std::to_string(out.size()) +
                                 " entries, the communicator " + std::to_string(n) + " ranks");
  return out;
}

}  // namespace

void import_mpi4py_api() {
  if (import_mpi4py() < 0) throw py::error_already_set();
}

MPI_Comm to_comm(py::handle comm) {
  int initialized = 0, finalized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  check_mpi(MPI_Finalized(&finalized), "MPI_Finalized");
  if (!initialized || finalized)
    throw Error(MPI_ERR_OTHER, finalized ? "agx: MPI is already finalized"
                                         : "agx: MPI is not initialized (mpi4py.rc.initialize is "
                                           "False and MPI.Init() was not called)");
  if (!PyObject_TypeCheck(comm.ptr(), &PyMPIComm_Type))
    throw py::type_error("agx: comm must be an mpi4py.MPI.Comm, got " + type_name(comm));
  MPI_Comm* c = PyMPIComm_Get(comm.ptr());
  if (c == nullptr) throw py::error_already_set();
  if (*c == MPI_COMM_NULL)
    throw Error(MPI_ERR_COMM, "agx: the communicator is MPI.COMM_NULL (freed or never created)");
  int inter = 0;
  check_mpi(MPI_Comm_test_inter(*c, &inter), "MPI_Comm_test_inter");
  if (inter) throw Error(MPI_ERR_COMM, "agx: inter-communicators are not supported");
  return *c;
}

Options to_options(const std::optional<std::string>& algorithm) {
  Options o;
  if (!algorithm) return o;
  std::string why;
  if (const auto a = parse_algorithm_choice(*algorithm, &why)) {  // AGX_ALGO's syntax
    o.algorithm = a->id;
    o.radix = a->id == Algorithm::automatic ? 0 : a->radix;
    return o;
  }
  std::string known;
  for (const auto& e : algorithms()) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw Error(MPI_ERR_ARG, "agx: algorithm '" + *algorithm + "' is not valid" +
                               (why.empty() ? "" : " (" + why + ")") + "; known: " + known);
}

Call uniform_call(py::handle comm, py::handle send, py::handle recv,
                  const std::optional<std::string>& algorithm) {
  Call c;
  c.comm = to_comm(comm);
  c.options = to_options(algorithm);
  c.nranks = comm_size(c.comm);
  const auto n = static_cast<std::size_t>(c.nranks);
  if (is_in_place(send)) {  // in place
    if (recv.is_none()) throw py::value_error("agx: in place (send=None) needs recv");
    py::array r = as_array(recv, "recv", true);
    const auto items = static_cast<std::size_t>(r.size());
    if (items % n != 0)
      throw Error(MPI_ERR_COUNT, "agx: in place, recv has " + std::to_string(items) +
                                     " elements, not a multiple of the " + std::to_string(n) +
                                     " ranks");
    c.block_bytes = items / n * static_cast<std::size_t>(r.itemsize());
    c.buffers = {nullptr, r.mutable_data(), true};
    c.recv = std::move(r);
    return c;
  }
  py::array s = as_array(send, "send", false);
  const auto count = static_cast<std::size_t>(s.size());
  c.block_bytes = static_cast<std::size_t>(s.nbytes());
  checked_product(c.block_bytes, n, "N x send");
  py::array r = recv.is_none() ? allocate_rows(s, n) : as_array(recv, "recv", true);
  if (!recv.is_none()) {
    check_same_dtype(s, r);
    const std::size_t need = count * n;
    if (static_cast<std::size_t>(r.size()) < need)
      throw Error(MPI_ERR_COUNT, "agx: recv holds " + std::to_string(r.size()) +
                                     " elements, needs " + std::to_string(need) + " (" +
                                     std::to_string(n) + " ranks x " + std::to_string(count) + ")");
    check_no_overlap(s, r);
  }
  c.buffers = {s.data(), r.mutable_data(), false};
  c.send = std::move(s);
  c.recv = std::move(r);
  return c;
}

Call varying_call(py::handle comm, py::handle send, py::handle recv, py::handle counts,
                  py::handle displs, const std::optional<std::string>& algorithm) {
  Call c;
  c.comm = to_comm(comm);
  c.options = to_options(algorithm);
  c.nranks = comm_size(c.comm);
  const int rank = comm_rank(c.comm);
  const bool in_place = is_in_place(send);
  if (in_place && recv.is_none()) throw py::value_error("agx: in place (send=None) needs recv");
  std::optional<py::array> s;  // py::array{} would allocate an array
  if (!in_place) s = as_array(send, "send", false);

  const std::vector<long long> count = to_integers(counts, "counts", c.nranks);
  std::vector<long long> displ;
  if (displs.is_none()) {  // packed in rank order
    long long at = 0;
    for (const long long k : count) {
      displ.push_back(at);
      if (k > 0 && __builtin_add_overflow(at, k, &at))
        throw Error(MPI_ERR_COUNT, "agx: the counts add up to more elements than a buffer holds");
    }
  } else {
    displ = to_integers(displs, "displs", c.nranks);
  }
  long long end = 0;  // the receive elements the blocks span
  for (int i = 0; i < c.nranks; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (count[u] < 0)
      throw Error(MPI_ERR_COUNT, "agx: negative count " + std::to_string(count[u]) + " at index " +
                                     std::to_string(i));
    if (displ[u] < 0)
      throw Error(MPI_ERR_COUNT, "agx: negative displacement " + std::to_string(displ[u]) +
                                     " at index " + std::to_string(i));
    long long block_end = 0;
    if (__builtin_add_overflow(displ[u], count[u], &block_end))
      throw Error(MPI_ERR_COUNT, "agx: block " + std::to_string(i) + " ends past any buffer");
    if (count[u] > 0 && block_end > end) end = block_end;
  }
  py::array r = recv.is_none()
                    ? py::array(s->dtype(), std::vector<py::ssize_t>{static_cast<py::ssize_t>(end)})
                    : as_array(recv, "recv", true);
  if (recv.is_none()) std::fill_n(static_cast<char*>(r.mutable_data()), r.nbytes(), '\0');
  if (!in_place) check_same_dtype(*s, r);
  const auto items = static_cast<long long>(r.size());
  const auto elem = static_cast<std::size_t>(r.itemsize());
  for (int i = 0; i < c.nranks; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (count[u] > 0 && displ[u] + count[u] > items)
      throw Error(MPI_ERR_ARG, "agx: block " + std::to_string(i) + " (displacement " +
                                   std::to_string(displ[u]) + ", count " +
                                   std::to_string(count[u]) + ") ends past recv's " +
                                   std::to_string(items) + " elements");
  }
  const auto own = static_cast<std::size_t>(rank);
  if (!in_place && s->size() != count[own])
    throw Error(MPI_ERR_COUNT, "agx: send has " + std::to_string(s->size()) +
                                   " elements but counts[" + std::to_string(rank) + "] is " +
                                   std::to_string(count[own]));
  if (!in_place) check_no_overlap(*s, r);
  c.bytes.resize(count.size());
  c.offsets.resize(count.size());
  std::size_t total = 0;
  for (std::size_t u = 0; u < count.size(); ++u) {
    c.bytes[u] = checked_product(static_cast<std::size_t>(count[u]), elem, "a count");
    c.offsets[u] = checked_product(static_cast<std::size_t>(displ[u]), elem, "a displacement");
    if (__builtin_add_overflow(total, c.bytes[u], &total))
      throw Error(MPI_ERR_COUNT, "agx: the blocks add up to more bytes than a buffer holds");
  }
  c.buffers = {in_place ? nullptr : s->data(), r.mutable_data(), in_place};
  if (!in_place) c.send = std::move(*s);
  c.recv = std::move(r);
  return c;
}

}  // namespace agx::python
