// The two clocks ringlog reads, in nanoseconds: the realtime clock (CLOCK_REALTIME) for
// what is stored or shown as a date (Timestamp records, creation and activity times),
// the monotonic clock (CLOCK_MONOTONIC) for durations, deadlines and timeouts, which
// must not jump when the date is set. Inline: the write path reads them.
#pragma once

#include <time.h>

#include <cstdint>

namespace ringlog {

constexpr std::uint64_t to_ns(const timespec& ts) noexcept {
  return std::uint64_t(ts.tv_sec) * 1'000'000'000u + std::uint64_t(ts.tv_nsec);
}

inline std::uint64_t realtime_ns() noexcept {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return to_ns(ts);
}

inline std::uint64_t monotonic_ns() noexcept {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return to_ns(ts);
}

}  // namespace ringlog
