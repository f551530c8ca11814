#pragma once
// agx.Request and agx.Plan: agx::Request / agx::Plan plus the arrays they read and
// write, held until the handle is gone so that Python never frees a buffer in flight.
// wait() and start() run without the GIL; test() keeps it (it never blocks). A handle
// is used by one thread at a time: a test() while another thread waits answers False.

#include "call.hpp"

#include <agx/request.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <string>

namespace agx::python {

namespace py = pybind11;

class PyRequest {
 public:
  PyRequest(Request request, Call call);
  PyRequest(const PyRequest&) = delete;
  PyRequest& operator=(const PyRequest&) = delete;
  ~PyRequest();

  bool test();
  py::object wait();
  bool active() const { return request_->active(); }
  std::string algorithm() const;
  const py::object& recv() const { return recv_; }

 private:
  py::object send_, recv_;              // destroyed after request_
  std::unique_ptr<Request> request_;
  std::mutex mutex_;
};

class PyPlan {
 public:
  PyPlan(Plan plan, Call call);
  PyPlan(const PyPlan&) = delete;
  PyPlan& operator=(const PyPlan&) = delete;
  ~PyPlan();

  void start();
  bool test();
  py::object wait();
  bool active() const { return plan_->active(); }
  std::string algorithm() const;
  unsigned long long starts() const { return plan_->starts(); }
  const py::object& send() const { return send_; }
  const py::object& recv() const { return recv_; }

 private:
  py::object send_, recv_;
  std::unique_ptr<Plan> plan_;
  std::mutex mutex_;
};

}  // namespace agx::python
