# RINGLOG_SANITIZE=thread|address switches the whole build to one sanitizer.
# CI builds each in its own directory and runs only the tests labelled for it.
# Debug information is line tables only (-g1, after the build type's -g): reports keep
# their file:line stacks, and the builds take about a quarter less time (CLI11, header
# only, costs 30-50 s of code generation per tool under ASan at -g).
if(RINGLOG_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -O1 -g1
                      $<$<CXX_COMPILER_ID:GNU>:-Wno-tsan>)  # fences: see docs/RING.md
  add_link_options(-fsanitize=thread)
elseif(RINGLOG_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -O1 -g1)
  add_link_options(-fsanitize=address,undefined)
elseif(NOT RINGLOG_SANITIZE STREQUAL "")
  message(FATAL_ERROR "RINGLOG_SANITIZE must be '', 'thread' or 'address'")
endif()

# Fuzz builds instrument the whole library for coverage; the targets add the driver.
# UBSan reports are fatal (as in the ASan+UBSan build): by default they only print and
# the run goes on, so a UB finding would never fail a fuzz target. -O1 (after the build
# type's -O0), as in the sanitizer builds: targets run about twice as many inputs per
# second, and reports keep their stacks (frame pointers, line tables).
if(RINGLOG_BUILD_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -O1 -g1)
  add_link_options(-fsanitize=address,undefined)
endif()
