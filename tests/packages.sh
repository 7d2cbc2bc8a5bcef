#!/usr/bin/env bash
# tests/packages.sh [SOURCE_DIR [BUILD_DIR]] - the Debian packages (issue
# 26), as tests/run.sh runs them after the test suites: from a copy of the
# tree's files (what git tracks, as a clean clone has them), dpkg-buildpackage
# -b builds ocsd, ocsctl, ocs-devsim and ocsplan (debian/), without a
# compiler warning (-O2 and Debian's hardening flags). With BUILD_DIR (what
# tests/run.sh passes: its RelWithDebInfo build, configured with those flags
# and -Werror) the packages take the programs of that tree instead of
# compiling them again (debian/rules, OCSD_PREBUILT), once its configuration
# is checked to hold every flag dpkg-buildflags gives; lintian must report
# no error and no warning but those debian/README.packaging explains; the
# packages are installed with dpkg into a scratch root (--root, maintainer
# scripts run chrootless with DPKG_ROOT, dependencies taken from this
# machine), and there:
#   - ocsd --version and ocsd --check-config /etc/ocsd/fabric.json pass;
#   - man -w finds every page; the completions are where bash-completion
#     looks; /etc/default/ocsd is a conffile; deploy/monitoring is in
#     /usr/share/ocsd/monitoring, not compressed;
#   - the system user ocsd exists (sysusers) and owns nothing but reads
#     /etc/ocsd (0750 root:ocsd, tmpfiles);
#   - systemd-analyze verify --root accepts ocsd.service;
#   - remove keeps /etc/ocsd and the state directory; purge removes the
#     state directory;
#   - the same version installed again over itself (an upgrade) keeps an
#     edited /etc/default/ocsd and the state.
# A tool this needs that the machine lacks is a failure that names it.
# Prints "N passed, N failed" last; exits 1 on any failure.
set -uo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
prebuilt=""
[ -n "${2:-}" ] && prebuilt=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/ocsd-packages.XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0
ok() { echo "ok: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
finish() { echo "packages: $pass passed, $fail failed"; [ "$fail" = 0 ]; exit $?; }

for tool in dpkg-buildpackage dh lintian dpkg man systemd-analyze systemd-sysusers \
  systemd-tmpfiles fakeroot; do
  command -v "$tool" >/dev/null || bad "$tool is missing (deploy/install-deps.sh installs it)"
done
[ "$fail" = 0 ] || finish

# 1. build from the tracked files (or package BUILD_DIR's programs, once
# its flags are checked: a tree built otherwise would prove nothing)
if [ -n "$prebuilt" ]; then
  cache=$prebuilt/CMakeCache.txt
  cached() { sed -n "s/^$1:[A-Z]*=//p" "$cache"; }
  missing=""
  for f in $(cd "$src" && bash tests/debian-flags.sh C); do
    [[ " $(cached CMAKE_C_FLAGS) " == *" $f "* ]] || missing+=" CMAKE_C_FLAGS:$f"
  done
  ld_flags=$(cd "$src" && bash tests/debian-flags.sh LD)
  for v in CMAKE_EXE_LINKER_FLAGS CMAKE_SHARED_LINKER_FLAGS CMAKE_MODULE_LINKER_FLAGS; do
    for f in $ld_flags; do
      [[ " $(cached "$v") " == *" $f "* ]] || missing+=" $v:$f"
    done
  done
  case "$(cached CMAKE_BUILD_TYPE)" in RelWithDebInfo | Release | None | "") ;;
    *) missing+=" CMAKE_BUILD_TYPE=RelWithDebInfo (not $(cached CMAKE_BUILD_TYPE))" ;; esac
  [ "$(cached OCSD_WERROR)" = ON ] || missing+=" OCSD_WERROR=ON"
  [ "$(cached OCSD_SANITIZE)" = ON ] && missing+=" OCSD_SANITIZE=OFF"
  if [ -n "$missing" ] || [ ! -x "$prebuilt/daemon/ocsd" ]; then
    bad "$prebuilt is not a built tree with Debian's flags and -Werror: missing$missing"
    finish
  fi
  ok "$prebuilt compiled with Debian's flags (-O2, hardening=+all) and -Werror: no warning"
  # the packaging's own configuration (debian/rules without OCSD_PREBUILT:
  # the programs only) still configures; its programs are a subset of
  # BUILD_DIR's
  if cmake -S "$src" -B "$work/configure" -DBUILD_TESTING=OFF >"$work/configure.log" 2>&1; then
    ok "the packaging's configuration (-DBUILD_TESTING=OFF) configures"
  else
    tail -20 "$work/configure.log"
    bad "cmake -DBUILD_TESTING=OFF fails (log above)"
  fi
fi
mkdir -p "$work/src"
(cd "$src" && git ls-files -z -co --exclude-standard | tar --null -cf - -T -) | tar -xf - -C "$work/src"
if (cd "$work/src" && OCSD_PREBUILT=$prebuilt dpkg-buildpackage -b -uc -us -j"$(nproc)") \
  >"$work/build.log" 2>&1; then
  ok "dpkg-buildpackage -b -uc -us${prebuilt:+ (the programs of $prebuilt)}"
else
  tail -40 "$work/build.log"
  bad "dpkg-buildpackage failed (log above)"
  finish
fi
# the optimizer's warnings (the package build is -O2 with Debian's hardening
# flags, FORTIFY_SOURCE included) fail CI here, never a packager's build
if [ -z "$prebuilt" ]; then
  warnings=$(grep -E '^[^ ]+\.[ch]:[0-9]+:[0-9]+: warning:' "$work/build.log")
  if [ -z "$warnings" ]; then ok "the package build compiles without a warning"
  else bad "the package build warns: $warnings"; fi
fi
debs=()
for p in ocsd ocsctl ocs-devsim ocsplan; do
  f=$(ls "$work"/${p}_*.deb 2>/dev/null | head -1)
  if [ -n "$f" ]; then ok "package $p built"; debs+=("$f"); else bad "no $p package"; fi
done

# 2. lintian: no error; warnings only those debian/README.packaging names
lintian --no-tag-display-limit "$work"/*.changes >"$work/lintian.log" 2>&1
errors=$(grep -c '^E:' "$work/lintian.log")
unexplained=$(grep '^W:' "$work/lintian.log" | while read -r _ pkg tag _; do
  grep -qF "\`${tag}\`" "$src/debian/README.packaging" || echo "$pkg $tag"
done)
if [ "$errors" = 0 ]; then ok "lintian: no error"; else bad "lintian: $errors error(s): $(grep '^E:' "$work/lintian.log")"; fi
if [ -z "$unexplained" ]; then ok "lintian: every warning explained in debian/README.packaging"
else bad "lintian warnings not explained in debian/README.packaging: $unexplained"; fi

# 3. install into a scratch root
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers" "$root/etc"
touch "$root/var/lib/dpkg/status"
: >"$root/etc/passwd"
: >"$root/etc/group"
dpkgr() { dpkg --root="$root" --force-script-chrootless --force-depends --log="$work/dpkg.log" "$@"; }
if dpkgr -i "${debs[@]}" >"$work/install.log" 2>&1; then ok "dpkg --root: installed"
else cat "$work/install.log"; bad "dpkg --root -i failed"; finish; fi

out=$("$root/usr/sbin/ocsd" --version 2>&1) && [[ $out == "ocsd "* ]] && ok "ocsd --version: ${out%%$'\n'*}" ||
  bad "ocsd --version: $out"
if "$root/usr/sbin/ocsd" --check-config "$root/etc/ocsd/fabric.json" >"$work/check.log" 2>&1; then
  ok "ocsd --check-config /etc/ocsd/fabric.json"
else bad "ocsd --check-config: $(cat "$work/check.log")"; fi
for pg in ocsd ocsctl ocsplan ocs-devsim ocsd-fabric; do
  if MANPATH=$root/usr/share/man man -w "$pg" >/dev/null 2>&1; then ok "man -w $pg"
  else bad "man -w $pg finds nothing in the packages"; fi
done
for c in ocsctl ocsplan; do
  [ -f "$root/usr/share/bash-completion/completions/$c" ] && ok "completion of $c" ||
    bad "no completion of $c"
done
mon=$root/usr/share/ocsd/monitoring
if [ -f "$mon/ocsd.rules.yml" ] && [ -f "$mon/grafana/ocsd-dashboard.json" ] &&
  [ -f "$mon/prometheus.yml" ] && [ -f "$mon/README.md" ]; then
  ok "the dashboard, alert rules and runbook in /usr/share/ocsd/monitoring, uncompressed"
else bad "/usr/share/ocsd/monitoring: $(cd "$mon" 2>&1 && find . -type f | tr '\n' ' ')"; fi
grep -qx /etc/default/ocsd "$root/var/lib/dpkg/info/ocsd.conffiles" &&
  ok "/etc/default/ocsd is a conffile" || bad "/etc/default/ocsd is not a conffile"
grep -q '^ocsd:' "$root/etc/passwd" && ok "user ocsd created (sysusers)" || bad "no user ocsd in the root's passwd"
gid=$(awk -F: '$1 == "ocsd" { print $3 }' "$root/etc/group")
if [ -n "$gid" ] && [ "$(stat -c '%a %u %g' "$root/etc/ocsd")" = "750 0 $gid" ] &&
  [ "$(stat -c '%a %u %g' "$root/etc/ocsd/fabric.json")" = "640 0 $gid" ]; then
  ok "/etc/ocsd 0750 root:ocsd and its fabric file 0640 root:ocsd (tmpfiles)"
else bad "/etc/ocsd: $(stat -c '%a %u %g' "$root/etc/ocsd") and fabric.json: $(stat -c '%a %u %g' "$root/etc/ocsd/fabric.json") (group ocsd: ${gid:-none})"; fi
systemd-analyze verify --root="$root" ocsd.service >"$work/verify.log" 2>&1
# a file:line message is the unit's mistake, and so is an ocsd it names that
# is not there; what the scratch root lacks (sysinit.target, /bin/kill) is not
if grep -qE '\.service:[0-9]+:|Command [^ ]*/ocsd is not' "$work/verify.log"; then
  bad "systemd-analyze verify ocsd.service: $(cat "$work/verify.log")"
else ok "systemd-analyze verify --root: ocsd.service"; fi
[ ! -e "$root/etc/systemd/system/multi-user.target.wants/ocsd.service" ] &&
  ok "ocsd.service not enabled at install (it needs its fabric and TLS files first)" ||
  bad "ocsd.service enabled at install"

# 4. an upgrade (the same packages again) keeps edited conffiles and state
mkdir -p "$root/var/lib/ocsd"
echo state >"$root/var/lib/ocsd/ocsd.db"
sed -i 's/^OCSD_OPTS=""/OCSD_OPTS="--retention-days 30"/' "$root/etc/default/ocsd"
if dpkgr --force-confold -i "${debs[@]}" >"$work/upgrade.log" 2>&1 &&
  grep -q '^OCSD_OPTS="--retention-days 30"' "$root/etc/default/ocsd" &&
  [ -f "$root/var/lib/ocsd/ocsd.db" ]; then
  ok "upgrade: the edited /etc/default/ocsd and the state kept"
else bad "upgrade: $(tail -5 "$work/upgrade.log")"; fi

# 5. remove keeps /etc/ocsd and the state; purge removes the state
dpkgr -r ocsd >"$work/remove.log" 2>&1
if [ ! -e "$root/usr/sbin/ocsd" ] && [ -f "$root/var/lib/ocsd/ocsd.db" ] &&
  [ -f "$root/etc/default/ocsd" ]; then ok "remove: the program goes, /etc and the state stay"
else bad "remove: $(cat "$work/remove.log")"; fi
dpkgr -P ocsd >"$work/purge.log" 2>&1
if [ ! -e "$root/var/lib/ocsd" ] && [ ! -e "$root/etc/default/ocsd" ]; then
  ok "purge: the state directory and the conffiles go"
else bad "purge: $(ls -A "$root/var/lib/ocsd" 2>&1) $(cat "$work/purge.log")"; fi
finish
