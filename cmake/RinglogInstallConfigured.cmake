# Files whose text names installed paths (ringlog.pc, the systemd units) are configured
# when they are installed, for the prefix they are installed under: `cmake --install
# build --prefix P`, a DESTDIR staging or CPack's /usr must never get the configure-time
# prefix. Never writes outside DESTDIR + the install prefix (or its /etc, see below).
#
# At configure time: include() this file and call
#   ringlog_install_configured(TEMPLATE DESTINATION [RENAME NAME])
# DESTINATION may use @RINGLOG_PREFIX@, @RINGLOG_SYSCONFDIR@, @RINGLOG_LIBDIR@...; a
# relative one is under the prefix. The template sees the same variables (@ONLY).
#
# At install time (install(CODE) runs this file again with RINGLOG_IC_TEMPLATE set):
#   RINGLOG_PREFIX      the install prefix
#   RINGLOG_SYSCONFDIR  /etc for the prefix /usr (GNUInstallDirs' rule), else PREFIX/etc
#   RINGLOG_BINDIR, RINGLOG_SBINDIR, RINGLOG_LIBDIR, RINGLOG_INCLUDEDIR   absolute
#   RINGLOG_PC_LIBDIR, RINGLOG_PC_INCLUDEDIR   the same, ${prefix}/... when under it
#   RINGLOG_UNITDIR     PREFIX/lib/systemd/system (/usr/lib/systemd/system for /usr)
#   PROJECT_VERSION

if(NOT DEFINED RINGLOG_IC_TEMPLATE)
  set(RINGLOG_IC_SCRIPT ${CMAKE_CURRENT_LIST_FILE})
  function(ringlog_install_configured template destination)
    cmake_parse_arguments(A "" "RENAME" "" ${ARGN})
    get_filename_component(name ${template} NAME)
    string(REGEX REPLACE "\\.in$" "" name "${name}")
    if(A_RENAME)
      set(name ${A_RENAME})
    endif()
    install(CODE "
      set(RINGLOG_IC_TEMPLATE \"${template}\")
      set(RINGLOG_IC_DESTINATION \"${destination}\")
      set(RINGLOG_IC_NAME \"${name}\")
      set(RINGLOG_IC_DIRS \"${CMAKE_INSTALL_BINDIR};${CMAKE_INSTALL_SBINDIR};${CMAKE_INSTALL_LIBDIR};${CMAKE_INSTALL_INCLUDEDIR}\")
      set(RINGLOG_IC_VERSION \"${PROJECT_VERSION}\")
      set(RINGLOG_IC_WORK \"${CMAKE_CURRENT_BINARY_DIR}\")
      include(\"${RINGLOG_IC_SCRIPT}\")")
  endfunction()
  return()
endif()

# --- install time ---
set(RINGLOG_PREFIX "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "(.)/+$" "\\1" RINGLOG_PREFIX "${RINGLOG_PREFIX}")
if(RINGLOG_PREFIX STREQUAL "/usr")
  set(RINGLOG_SYSCONFDIR "/etc")
else()
  set(RINGLOG_SYSCONFDIR "${RINGLOG_PREFIX}/etc")
endif()
list(GET RINGLOG_IC_DIRS 0 _bindir)
list(GET RINGLOG_IC_DIRS 1 _sbindir)
list(GET RINGLOG_IC_DIRS 2 _libdir)
list(GET RINGLOG_IC_DIRS 3 _includedir)
foreach(v bindir sbindir libdir includedir)
  string(TOUPPER ${v} V)
  if(IS_ABSOLUTE "${_${v}}")
    set(RINGLOG_${V} "${_${v}}")
  else()
    set(RINGLOG_${V} "${RINGLOG_PREFIX}/${_${v}}")
  endif()
endforeach()
# For pkg-config: ${prefix}-relative where the directory is under the prefix, so that
# --define-variable=prefix=... still works.
foreach(V LIBDIR INCLUDEDIR)
  string(FIND "${RINGLOG_${V}}" "${RINGLOG_PREFIX}/" _at)
  if(_at EQUAL 0 AND NOT RINGLOG_PREFIX STREQUAL "/")
    string(LENGTH "${RINGLOG_PREFIX}" _n)
    string(SUBSTRING "${RINGLOG_${V}}" ${_n} -1 _rest)
    set(RINGLOG_PC_${V} "\${prefix}${_rest}")
  else()
    set(RINGLOG_PC_${V} "${RINGLOG_${V}}")
  endif()
endforeach()
set(RINGLOG_UNITDIR "${RINGLOG_PREFIX}/lib/systemd/system")
set(PROJECT_VERSION "${RINGLOG_IC_VERSION}")

string(CONFIGURE "${RINGLOG_IC_DESTINATION}" _dest @ONLY)
if(NOT IS_ABSOLUTE "${_dest}")
  set(_dest "${RINGLOG_PREFIX}/${_dest}")
endif()
# A private scratch file: parallel installs (a test's scratch prefix, CPack) of one
# build tree must not overwrite each other's configured copy.
string(RANDOM LENGTH 12 _tag)
set(_tmp "${RINGLOG_IC_WORK}/install-configured-${_tag}")
configure_file("${RINGLOG_IC_TEMPLATE}" "${_tmp}/${RINGLOG_IC_NAME}" @ONLY)
# file(INSTALL) adds DESTDIR and records the file in the install manifest.
file(INSTALL DESTINATION "${_dest}" TYPE FILE FILES "${_tmp}/${RINGLOG_IC_NAME}")
file(REMOVE_RECURSE "${_tmp}")
