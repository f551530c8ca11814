// The agx Python module (docs/python.md): all-gathers of NumPy arrays and other
// buffer-protocol objects over mpi4py communicators, through libagx's byte-level entry
// points. Blocking calls, wait() and start() run without the GIL.

#include "call.hpp"
#include "handles.hpp"

#include <agx/algorithm.hpp>
#include <agx/bytes.hpp>
#include <agx/error.hpp>
#include <agx/request.hpp>

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#ifndef AGX_VERSION
#define AGX_VERSION "unknown"
#endif

namespace py = pybind11;
using namespace py::literals;
using agx::python::Call;
using agx::python::PyPlan;
using agx::python::PyRequest;

namespace {

using OptName = std::optional<std::string>;

PyObject* error_type = nullptr;  // agx.Error, owned by the module for its lifetime

void raise_agx_error(const agx::Error& e) {
  py::object exc = py::reinterpret_borrow<py::object>(error_type)(e.what());
  exc.attr("error_class") = e.error_class();
  PyErr_SetObject(error_type, exc.ptr());
}

py::object run(const Call& c) {
  {
    py::gil_scoped_release nogil;
    agx::allgather_bytes(c.comm, c.buffers, c.layout(), c.options);
  }
  return c.recv;
}

std::unique_ptr<PyRequest> start(Call c) {
  agx::Request r;
  {
    py::gil_scoped_release nogil;
    r = agx::start_allgather_bytes(c.comm, c.buffers, c.layout(), c.options);
  }
  return std::make_unique<PyRequest>(std::move(r), std::move(c));
}

std::unique_ptr<PyPlan> plan(Call c) {
  agx::Plan p;
  {
    py::gil_scoped_release nogil;
    p = agx::plan_allgather_bytes(c.comm, c.buffers, c.layout(), c.options);
  }
  return std::make_unique<PyPlan>(std::move(p), std::move(c));
}

constexpr const char* allgather_doc = R"(allgather(comm, send, recv=None, algorithm=None) -> recv

All-gathers `send` from every rank of `comm` (an mpi4py.MPI.Comm) into `recv`: rank i's
block lands at elements [i*send.size, (i+1)*send.size) of the flat recv. `send` and
`recv` are C-contiguous objects with the buffer protocol of the same dtype (any
dtype without Python objects, structured ones included); recv holds at least
N*send.size elements. recv=None allocates N*len(send) rows of send's dtype. send=None
gathers in place: recv holds N equal blocks, this rank's already at its place.
`algorithm` is a name of agx.algorithms() (None: auto, AGX_ALGO applies). Returns recv.
Raises agx.Error (with .error_class) before any communication on bad input.)";

constexpr const char* allgatherv_doc = R"(allgatherv(comm, send, recv, counts, displs=None, algorithm=None) -> recv

The v form: rank i contributes counts[i] elements (send.size == counts[rank]) that land
at recv's flat elements [displs[i], displs[i]+counts[i]); counts and displacements are
in elements of the dtype, counts may be 0, displacements in any order, elements between
blocks are left as they are. displs=None packs the blocks in rank order. send=None
gathers in place (this rank's block already at displs[rank]). recv=None allocates a
zeroed 1-d array just long enough. Returns recv.)";

}  // namespace

PYBIND11_MODULE(_agx, m) {
  agx::python::import_mpi4py_api();
  m.doc() = "agx: all-gather for MPI jobs, for mpi4py communicators and NumPy arrays "
            "(docs/python.md)";
  m.attr("__version__") = AGX_VERSION;

  py::dict error_dict;
  error_dict["error_class"] = static_cast<int>(MPI_ERR_OTHER);
  error_type = PyErr_NewExceptionWithDoc(
      "agx.Error",
      "An agx call failed or got bad input. `error_class` is the MPI error class "
      "(compare with mpi4py's MPI.ERR_COUNT, MPI.ERR_COMM, ...).",
      PyExc_RuntimeError, error_dict.ptr());
  if (error_type == nullptr) throw py::error_already_set();
  m.attr("Error") = py::handle(error_type);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const agx::Error& e) {
      raise_agx_error(e);
    }
  });

  py::class_<PyRequest>(m, "Request",
                        "A started all-gather (agx.start / agx.startv). It holds its arrays "
                        "until it is gone; read recv only once it is complete.")
      .def("test", &PyRequest::test,
           "Advances every running agx call without blocking; True once this one is complete.")
      .def("wait", &PyRequest::wait,
           "Blocks (without the GIL) until complete; returns recv.")
      .def_property_readonly("active", &PyRequest::active,
                             "True while started and not yet seen complete.")
      .def_property_readonly("algorithm", &PyRequest::algorithm, "The algorithm this call runs.")
      .def_property_readonly("recv", &PyRequest::recv, "The receive array.");

  py::class_<PyPlan>(m, "Plan",
                     "A persistent all-gather over fixed arrays (agx.plan / agx.planv): "
                     "each start() gathers send's current content into recv.")
      .def("start", &PyPlan::start,
           "Starts one all-gather (collective); agx.Error while the last is still running.")
      .def("test", &PyPlan::test, "Advances without blocking; True once the last start is done.")
      .def("wait", &PyPlan::wait, "Blocks (without the GIL) until the last start is done; returns recv.")
      .def_property_readonly("active", &PyPlan::active, "True while a start is running.")
      .def_property_readonly("algorithm", &PyPlan::algorithm, "The algorithm every start runs.")
      .def_property_readonly("starts", &PyPlan::starts, "How many times start() ran.")
      .def_property_readonly("send", &PyPlan::send, "The send array (None for in place).")
      .def_property_readonly("recv", &PyPlan::recv, "The receive array.");

  m.def(
      "allgather",
      [](py::object comm, py::object send, py::object recv, const OptName& algorithm) {
        return run(agx::python::uniform_call(comm, send, recv, algorithm));
      },
      "comm"_a, "send"_a, "recv"_a = py::none(), "algorithm"_a = py::none(), allgather_doc);
  m.def(
      "allgatherv",
      [](py::object comm, py::object send, py::object recv, py::object counts, py::object displs,
         const OptName& algorithm) {
        return run(agx::python::varying_call(comm, send, recv, counts, displs, algorithm));
      },
      "comm"_a, "send"_a, "recv"_a, "counts"_a, "displs"_a = py::none(),
      "algorithm"_a = py::none(), allgatherv_doc);
  m.def(
      "start",
      [](py::object comm, py::object send, py::object recv, const OptName& algorithm) {
        return start(agx::python::uniform_call(comm, send, recv, algorithm));
      },
      "comm"_a, "send"_a, "recv"_a = py::none(), "algorithm"_a = py::none(),
      "start(comm, send, recv=None, algorithm=None) -> Request\n\nNonblocking allgather: same "
      "arguments and checks; collective start order. Complete it with test()/wait().");
  m.def(
      "startv",
      [](py::object comm, py::object send, py::object recv, py::object counts, py::object displs,
         const OptName& algorithm) {
        return start(agx::python::varying_call(comm, send, recv, counts, displs, algorithm));
      },
      "comm"_a, "send"_a, "recv"_a, "counts"_a, "displs"_a = py::none(),
      "algorithm"_a = py::none(),
      "startv(comm, send, recv, counts, displs=None, algorithm=None) -> Request\n\n"
      "Nonblocking allgatherv.");
  m.def(
      "plan",
      [](py::object comm, py::object send, py::object recv, const OptName& algorithm) {
        return plan(agx::python::uniform_call(comm, send, recv, algorithm));
      },
      "comm"_a, "send"_a, "recv"_a = py::none(), "algorithm"_a = py::none(),
      "plan(comm, send, recv=None, algorithm=None) -> Plan\n\nPersistent allgather over these "
      "arrays (collective): choose and prepare once, then start()/wait() as often as needed.");
  m.def(
      "planv",
      [](py::object comm, py::object send, py::object recv, py::object counts, py::object displs,
         const OptName& algorithm) {
        return plan(agx::python::varying_call(comm, send, recv, counts, displs, algorithm));
      },
      "comm"_a, "send"_a, "recv"_a, "counts"_a, "displs"_a = py::none(),
      "algorithm"_a = py::none(),
      "planv(comm, send, recv, counts, displs=None, algorithm=None) -> Plan\n\n"
      "Persistent allgatherv.");
  m.def(
      "choose_algorithm",
      [](py::object comm, py::object send, py::object recv, const OptName& algorithm) {
        const Call c = agx::python::uniform_call(comm, send, recv, algorithm);
        agx::AlgorithmChoice a{};
        {
          py::gil_scoped_release nogil;
          a = agx::choose_algorithm(c.comm, c.layout(), c.options, c.buffers.in_place);
        }
        return agx::to_string(a);
      },
      "comm"_a, "send"_a, "recv"_a = py::none(), "algorithm"_a = py::none(),
      "choose_algorithm(comm, send, recv=None, algorithm=None) -> str\n\nThe algorithm "
      "allgather would run for these arguments (collective on a communicator's first use).");
  m.def(
      "_cxx_loop",
      [](py::object comm, py::object send, py::object recv, int iterations,
         const OptName& algorithm) {
        const Call c = agx::python::uniform_call(comm, send, recv, algorithm);
        const agx::Layout layout = c.layout();
        py::gil_scoped_release nogil;
        const double t0 = MPI_Wtime();
        for (int i = 0; i < iterations; ++i)
          agx::allgather_bytes(c.comm, c.buffers, layout, c.options);
        return MPI_Wtime() - t0;
      },
      "comm"_a, "send"_a, "recv"_a, "iterations"_a, "algorithm"_a = py::none(),
      "Runs the C++ call (allgather_bytes) `iterations` times in a C++ loop and returns the "
      "seconds it took: the reference of examples/python/call_overhead.py.");
  m.def(
      "algorithms",
      [] {
        py::dict d;
        for (const auto& e : agx::algorithms())
          d[py::str(std::string(e.name))] = std::string(e.summary);
        return d;
      },
      "algorithms() -> dict\n\nThe algorithm names agx accepts, each with its summary.");
  m.def(
      "set_progress_thread",
      [](bool on) {
        py::gil_scoped_release nogil;
        agx::set_progress_thread(on);
      },
      "on"_a,
      "Starts (True) or stops (False) agx's progress thread, which advances running requests "
      "and plan starts in the background. Needs MPI_THREAD_MULTIPLE (mpi4py's default).");
  m.def("progress_thread_running", &agx::progress_thread_running,
        "Whether agx's progress thread runs.");
}
