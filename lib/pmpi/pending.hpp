#pragma once
// The interposer's nonblocking and persistent all-gathers (docs/interposer.md,
// "Nonblocking and persistent calls").
//
// MPI_Iallgather(v) starts a libagx request (agx::Request) and hands the user a
// generalized request (MPI_Grequest_start); MPI_Allgather(v)_init (MPI-4, or Open
// MPI's MPIX_ extension) makes a libagx plan (agx::Plan) and hands the user an
// inactive persistent receive of zero bytes on a private MPI_COMM_SELF duplicate,
// which MPI_Start starts together with the plan. Either handle is completed by agx
// once the data has moved (MPI_Grequest_complete; a zero-byte send to self), so that
// every MPI completion call, ours or the MPI library's own, sees it complete.
//
// A failure while the data moves is raised through the call's communicator when it is
// found, and then returned by the completion call that completes the request (for
// MPI_Waitall and the like, as MPI_ERR_IN_STATUS with the class in the status).
//
// Data moves only when agx runs: the interposer therefore also takes MPI_Wait,
// MPI_Test and their all/any/some forms, MPI_Request_get_status, MPI_Start(all) and
// MPI_Request_free. While no agx request is running they go straight to the MPI
// library; while one is, a wait becomes a loop of "advance agx's requests, test the
// user's" that spins briefly, then yields the core.

#include <mpi.h>

#include "pmpi/call.hpp"

namespace agx::pmpi {

/// MPI_Iallgather(v): checks and starts the call; *request is a generalized request.
int start_nonblocking(const GatherCall& call, MPI_Request* request) noexcept;

/// MPI_Allgather(v)_init: checks and plans the call; *request is inactive.
int init_persistent(const GatherCall& call, MPI_Request* request) noexcept;

/// Whether a completion call must advance agx: an agx request of this process is
/// running and the caller is not agx itself. Cheap (an atomic load).
bool must_progress() noexcept;

/// Advances every running agx request once and completes the MPI handles of those
/// that are done. Errors are raised through the call's communicator.
void progress_requests() noexcept;

/// MPI_Start on `request`: starts it when it is an agx persistent request and
/// returns true (with *rc set); false when the request is not agx's.
bool start_if_persistent(MPI_Request* request, int* rc) noexcept;

/// MPI_Request_free on `request`: frees it when it is an agx persistent request
/// (waiting for a running start first) and returns true (with *rc set).
bool free_if_persistent(MPI_Request* request, int* rc) noexcept;

/// MPI_Request_free on a running nonblocking agx request: the data still moves (agx
/// frees the MPI handle once it has); *request becomes MPI_REQUEST_NULL. False when
/// `request` is not such a request.
bool free_if_running(MPI_Request* request) noexcept;

/// MPI_Cancel on an agx request (nonblocking, persistent): collectives cannot be
/// cancelled, so MPI_ERR_REQUEST through its communicator (*rc set) and true; false
/// when `request` is not agx's.
bool cancel_refused(MPI_Request request, int* rc) noexcept;

/// Whether any agx persistent request exists (cheap).
bool persistent_requests() noexcept;
/// A completion call returned `request` complete: an agx persistent request becomes
/// inactive (MPI_Start may start it again).
void note_completed(MPI_Request request) noexcept;

/// After a completion call returned `request` complete: the error class of an agx
/// request (nonblocking or a persistent start) whose data movement failed, reported
/// once; MPI_SUCCESS otherwise. (The error has already gone through the
/// communicator's error handler when it was found.)
int request_error(MPI_Request request) noexcept;
/// Whether any failed agx request waits to be reported by request_error (cheap).
bool errors_pending() noexcept;
/// MPI_Request_free: forgets an unreported error of `request`.
void forget_error(MPI_Request request) noexcept;

/// MPI_Finalize: completes every running agx request and frees what agx made.
void finish_requests() noexcept;

}  // namespace agx::pmpi
