# Run at install time (install(CODE) in the top CMakeLists.txt): writes
# ocsd.service naming the ocsd and the docs of the prefix being installed
# to, which may differ from the prefix configured (`cmake --install build
# --prefix /usr` after a default /usr/local configure: issue 26). In:
# OCSD_UNIT_SRC, the unit as shipped (names /usr/sbin/ocsd and
# /usr/share/doc/ocsd); CMAKE_INSTALL_PREFIX and DESTDIR as cmake --install
# sets them.
file(READ "${OCSD_UNIT_SRC}" unit)
string(REPLACE "/usr/sbin/ocsd" "${CMAKE_INSTALL_PREFIX}/sbin/ocsd" unit "${unit}")
string(REPLACE "/usr/share/doc/ocsd" "${CMAKE_INSTALL_PREFIX}/share/doc/ocsd" unit "${unit}")
set(dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
message(STATUS "Installing: ${dest}/ocsd.service (for ${CMAKE_INSTALL_PREFIX})")
file(MAKE_DIRECTORY "${dest}")
file(WRITE "${dest}/ocsd.service" "${unit}")
