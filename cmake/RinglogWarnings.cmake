# Warning flags shared by every target of the project (not exported to users).
add_library(ringlog_warnings INTERFACE)
target_compile_options(ringlog_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
  -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
