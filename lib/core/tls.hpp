#pragma once
// AGX_FAST_TLS: the thread-local model of the per-call caches (the last call's shape, the
// last communicator looked up). initial-exec, so that a call reads them with no
// __tls_get_addr: libagx is loaded with the program or its MPI module, and these few
// bytes fit the static TLS surplus that a later dlopen leaves. agx-sim is the exception
// (tools/sim/build.sh defines AGX_DYNAMIC_TLS): SMPI dlopens one copy of the program per
// simulated rank, more copies than that surplus holds ("cannot allocate memory in static
// TLS block"), so there the compiler's default model is kept.
#if defined(AGX_DYNAMIC_TLS)
#define AGX_FAST_TLS
#else
#define AGX_FAST_TLS [[gnu::tls_model("initial-exec")]]
#endif
