// What every ringlog program shares at start-up (ringlog, ringlog-ncsa, ringlog-top,
// ringlog-stat, ringlog-dump, ringlog-forward, ringlog-demo and ringproxy): the
// version line. It never exits the process itself.
#pragma once

#include <string>
#include <string_view>

namespace ringlog::tool {

// "ringlog-top (ringlog) X.Y.Z": what --version prints, X.Y.Z the CMake project version.
std::string version_line(std::string_view program);

}  // namespace ringlog::tool
