/* bench_ring's LTTng-UST peer, a module that bench_ring loads with dlopen() once its
 * private session daemon runs (liblttng-ust registers with the daemon when it is
 * loaded, and reads LTTNG_HOME then). It holds the tracepoint provider and the call
 * site; it never decides anything about the measurement. */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "lttng_tp.h"

#include "lttng_peer.h"

int ringlog_bench_lttng_enabled(void) { return lttng_ust_tracepoint_enabled(ringlog_bench, msg) ? 1 : 0; }

void ringlog_bench_lttng_write(const void *prefix, size_t prefix_len, const void *body, size_t body_len) {
  lttng_ust_tracepoint(ringlog_bench, msg, (const uint8_t *)prefix, prefix_len, (const uint8_t *)body, body_len);
}

const char *ringlog_bench_lttng_field_type(void) { return "two byte sequences (prefix, body): lttng_ust_field_sequence(uint8_t)"; }
