/* What bench_ring looks up (dlsym) in its LTTng-UST peer module. */
#ifndef RINGLOG_BENCH_LTTNG_PEER_H
#define RINGLOG_BENCH_LTTNG_PEER_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
int ringlog_bench_lttng_enabled(void);
void ringlog_bench_lttng_write(const void *prefix, size_t prefix_len, const void *body, size_t body_len);
const char *ringlog_bench_lttng_field_type(void);
#ifdef __cplusplus
}
#endif
#endif
