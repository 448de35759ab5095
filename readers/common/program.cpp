// The start-up shared by every ringlog program (see program.hpp).
#include "program.hpp"

#include "ringlog/version.hpp"

namespace ringlog::tool {

std::string version_line(std::string_view program) {
  return std::string(program) + " (ringlog) " + kVersion;
}

}  // namespace ringlog::tool
