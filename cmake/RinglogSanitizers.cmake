# RINGLOG_SANITIZE=thread|address switches the whole build to one sanitizer.
# CI builds each in its own directory and runs only the tests labelled for it.
if(RINGLOG_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -O1 -g
                      $<$<CXX_COMPILER_ID:GNU>:-Wno-tsan>)  # fences: see docs/RING.md
  add_link_options(-fsanitize=thread)
elseif(RINGLOG_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -O1 -g)
  add_link_options(-fsanitize=address,undefined)
elseif(NOT RINGLOG_SANITIZE STREQUAL "")
  message(FATAL_ERROR "RINGLOG_SANITIZE must be '', 'thread' or 'address'")
endif()

# Fuzz builds instrument the whole library for coverage; the targets add the driver.
# UBSan reports are fatal (as in the ASan+UBSan build): by default they only print and
# the run goes on, so a UB finding would never fail a fuzz target.
if(RINGLOG_BUILD_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
endif()
