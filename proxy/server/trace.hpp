// RP_TRACE(txn, fmt, ...): a trace point of the server's stages, used inside a class
// with a Worker& w_. When tracing is off, one predictable branch and no call; when on
// (globally, or for one request from a trusted address), a Trace record and
// MAIN.trace_records. Compiled out entirely with RINGPROXY_NO_TRACE (ringproxy-notrace).
#pragma once

#include "ringproxy/counters.hpp"

#ifdef RINGPROXY_NO_TRACE
#define RP_TRACE(txn, ...) \
  do {                     \
  } while (0)
#else
#define RP_TRACE(txn, ...)                                           \
  do {                                                               \
    if ((txn).tracing()) [[unlikely]] {                              \
      w_.counters().add(::ringproxy::counters::main::trace_records); \
      (txn).trace_printf(__VA_ARGS__);                               \
    }                                                                \
  } while (0)
#endif
