// agx._torch: the process group class of the torch.distributed backend "agx"
// (process_group.hpp). Loaded by agx.torch (python/agx/torch.py), which registers the
// backend; torch.distributed must be imported first (it registers the base class).

#include "process_group.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

PYBIND11_MODULE(_torch, m) {
  m.doc() = "The agx process group for torch.distributed (use agx.torch)";
  py::class_<agx::torch::ProcessGroup, c10::intrusive_ptr<agx::torch::ProcessGroup>,
             c10d::ProcessGroup>(m, "ProcessGroupAgx")
      .def_static("create_world", &agx::torch::ProcessGroup::create_world, py::arg("rank"),
                  py::arg("size"), py::call_guard<py::gil_scoped_release>(),
                  "The default group: MPI_COMM_WORLD in torch's rank order (collective)")
      .def_static("create_group", &agx::torch::ProcessGroup::create_group, py::arg("ranks"),
                  py::arg("rank"), py::call_guard<py::gil_scoped_release>(),
                  "A group of the default group's ranks (collective over its members)")
      .def("calls", &agx::torch::ProcessGroup::calls,
           "Calls served so far, by operation name")
      .def("last_algorithm", &agx::torch::ProcessGroup::last_algorithm,
           "The algorithm, with its parameters, of the last all-gather")
      .def("last_way", &agx::torch::ProcessGroup::last_way,
           "Where the last all-gather wrote: direct, in place or staging");
}
