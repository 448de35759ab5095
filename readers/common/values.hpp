// The command-line values the programs share: byte sizes and the -t wait. One rule
// each, so that "8M" or "-t off" mean the same in every program. Pure functions; they
// never throw and never print: the caller words the error, naming its option.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace ringlog::tool {

// A byte size as Varnish reads one (VNUM_2bytes): a non-negative decimal number,
// fractions allowed ("1.5M"), then optionally one space and a unit k, m, g, t or p
// (powers of 1024, either case), then optionally b or B ("256kB", "512b", "4 KB").
// The value is rounded to a whole byte. nullopt when malformed (empty, a sign, an
// exponent, hex, anything after the unit), or above max.
std::optional<std::uint64_t> parse_size(std::string_view s,
                                        std::uint64_t max = std::numeric_limits<std::uint64_t>::max());

// -t SECONDS|off, as varnishlog's -t: "off" waits forever (-1), else a decimal number
// of seconds from 0 to 1e9. nullopt when malformed.
std::optional<double> parse_wait(std::string_view s);

}  // namespace ringlog::tool
