#!/usr/bin/env bash
# tests/debian-flags.sh C|LD - the compiler flags (CFLAGS and CPPFLAGS) or
# the linker flags of a Debian package build of ocsd: dpkg-buildflags with
# debian/rules' DEB_BUILD_MAINT_OPTIONS, for the current directory (the
# -ffile-prefix-map flag names it). tests/run.sh configures its
# RelWithDebInfo build with them; tests/packages.sh checks that build has
# them before it packages its programs.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
opts=$(sed -n 's/^export DEB_BUILD_MAINT_OPTIONS *= *//p' "$top/debian/rules")
[ -n "$opts" ] || { echo "tests/debian-flags.sh: no DEB_BUILD_MAINT_OPTIONS in debian/rules" >&2; exit 1; }
export DEB_BUILD_MAINT_OPTIONS=$opts
case "${1:-}" in
  C) echo "$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)" ;;
  LD) dpkg-buildflags --get LDFLAGS ;;
  *) echo "usage: tests/debian-flags.sh C|LD" >&2; exit 2 ;;
esac
