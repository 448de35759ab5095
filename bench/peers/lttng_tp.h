/* The LTTng-UST tracepoint that bench_ring measures as a peer: one event per message,
 * the message's two parts (prefix, body) as byte sequences. A byte sequence is LTTng's
 * fastest field for bytes (one memcpy each); a text field is copied byte by byte. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER ringlog_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./lttng_tp.h"

#if !defined(RINGLOG_BENCH_LTTNG_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define RINGLOG_BENCH_LTTNG_TP_H

#include <lttng/tracepoint.h>
#include <stddef.h>
#include <stdint.h>

LTTNG_UST_TRACEPOINT_EVENT(ringlog_bench, msg,
    LTTNG_UST_TP_ARGS(const uint8_t *, prefix, size_t, prefix_len, const uint8_t *, body, size_t, body_len),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_sequence(uint8_t, prefix, prefix, size_t, prefix_len)
        lttng_ust_field_sequence(uint8_t, body, body, size_t, body_len)))

#endif

#include <lttng/tracepoint-event.h>
