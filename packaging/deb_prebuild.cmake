# CPack pre-build script for the .deb, run on the staged tree, doing what dh_compress
# and dh_strip would: man pages gzipped (-9n: no name, no time stamp; Debian policy
# 12.1) and static libraries without their debug sections (22 MB of DWARF in
# libringlog.a of a RelWithDebInfo build).
file(GLOB_RECURSE _pages "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/usr/share/man/*")
foreach(_p ${_pages})
  if(_p MATCHES "\\.[1-9]$")
    execute_process(COMMAND gzip -9nf "${_p}" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "gzip ${_p} failed")
    endif()
  endif()
endforeach()
if(CPACK_RINGLOG_STRIP)
  file(GLOB_RECURSE _archives "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/usr/lib/*.a")
  foreach(_a ${_archives})
    execute_process(COMMAND "${CPACK_RINGLOG_STRIP}" --strip-debug "${_a}" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "strip --strip-debug ${_a} failed")
    endif()
  endforeach()
endif()
