// CLI11 for the project's programs (not part of the installed library): one place for
// the warning GCC 12 reports by mistake inside CLI11's string splitting.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <CLI/CLI.hpp>
#pragma GCC diagnostic pop
