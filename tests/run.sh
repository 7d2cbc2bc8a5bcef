#!/usr/bin/env bash
# README command (b): installs what the build and the tests need, builds ocsd
# and runs the default test suite (every label except bench) twice:
# RelWithDebInfo and ASan+UBSan (there without the label source: checks of
# the tree that do not depend on the build); beside the RelWithDebInfo
# tests, at the lowest priority, the ASan+UBSan build, the fuzz harnesses
# and the Debian packages (tests/packages.sh). The RelWithDebInfo build has
# Debian's build flags (-O2 and the hardening flags, tests/debian-flags.sh)
# under -Werror, so warnings only the optimizer finds break CI there, not a
# packager's build, and the packages take its programs instead of compiling
# them a second time. (--release adds the -O3 Release build, built only.)
# Every build here uses -Werror (OCSD_WERROR=ON; it is off by default). Each
# build directory keeps its configure.log. Exits non-zero after the first
# stage that fails.
#
#   tests/run.sh                 everything (what CI runs)
#   tests/run.sh --no-sanitize   skip the sanitizer build
#   tests/run.sh --release       also build Release (-O3, -Werror, no tests)
#   tests/run.sh --bench         also run the benchmarks (label bench)
#   tests/run.sh --no-packages   skip the Debian packages (tests/packages.sh:
#                                build, lintian, install into a scratch root)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

sanitize=1
release=0
bench=0
fuzz=1
packages=1
fuzz_hours=""
# seconds each libFuzzer harness runs in the default suite (a smoke run: the
# long runs are --fuzz-hours N; every build also replays the seeds and the
# crash regressions, label unit)
fuzz_seconds=10
usage() {
  echo "usage: tests/run.sh [--no-sanitize] [--release] [--no-fuzz] [--no-packages] [--bench] [--fuzz-hours N]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --no-sanitize) sanitize=0 ;;
    --release) release=1 ;;
    --no-fuzz) fuzz=0 ;;
    --no-packages) packages=0 ;;
    --bench) bench=1 ;;
    --fuzz-hours)
      [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage
      fuzz_hours=$2
      shift
      ;;
    *) usage ;;
  esac
  shift
done

bash deploy/install-deps.sh
jobs=$(nproc)
# The RelWithDebInfo tests run two more than the cores at once: most of the
# suite waits on devices, timers and child processes rather than computing
# (BSD process accounting: 63% of the 2 cores busy at three at once), and
# every test takes its ports from tests/integration/testports.py, so
# concurrent tests never share one. The timed tests that failed at four at
# once in fresh-clone runs (test_etcd, e2e_lab's and ring_drift's NETCONF
# reads) take two of the slots there (PROCESSORS 2 outside OCSD_SANITIZE):
# never more than two beside them, as before (four at once: 394 s against
# 467 s at three). The sanitizer tests run one more than the cores at once:
# at one per core they kept 1.3 of the 2 cores busy (BSD process
# accounting: 1,250 CPU-s in 948 s), three at once 1.6 (774 s), four no
# faster (777 s); replicas_jepsen, 1.3 cores by itself there, counts as
# two (its PROCESSORS in tests/integration/CMakeLists.txt).

# Ninja for a new build directory: a whole RelWithDebInfo build took 62 s
# against make's 90 (2 cores; make's recursive runs cost 26 s of system
# time more). A directory made earlier keeps its generator.
generator() { # build-dir
  [ -f "$1/CMakeCache.txt" ] || echo "-GNinja"
}
build() { # build-dir, cmake args...
  local dir=$1; shift
  mkdir -p "$dir"
  cmake -S . -B "$dir" $(generator "$dir") -DOCSD_WERROR=ON "$@" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; exit 1; }
  cmake --build "$dir" -j "$jobs"
}
stage() { echo "tests/run.sh: $* (+${SECONDS} s)"; }

tests() { # tests-at-once, build-dir, labels left out (regex)
  stage "tests in $2"
  (cd "$2" && ctest --output-on-failure -j "$1" -LE "$3")
}

fuzz_build() { # seconds per harness
  mkdir -p build-fuzz
  CC=clang-14 cmake -S . -B build-fuzz $(generator build-fuzz) -DOCSD_WERROR=ON \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-g1 -DOCSD_SANITIZE=ON -DOCSD_FUZZ=ON \
    -DOCSD_FUZZ_SECONDS="$1" >build-fuzz/configure.log 2>&1 ||
    { cat build-fuzz/configure.log; exit 1; }
  cmake --build build-fuzz -j "$jobs" --target fuzz_targets
}
fuzz_run() {
  stage "fuzz harnesses"
  (cd build-fuzz && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure -j "$jobs" -L fuzz)
}
if [ -n "$fuzz_hours" ]; then
  fuzz_build "$(awk -v h="$fuzz_hours" 'BEGIN { printf "%d", h * 3600 }')"
  fuzz_run
  exit 0
fi

stage "build"
# Debian's build flags (-O2, hardening: FORTIFY_SOURCE finds what -O2 alone
# does not) under -Werror: the packages take this build's programs
deb_c=$(bash tests/debian-flags.sh C)
deb_ld=$(bash tests/debian-flags.sh LD)
build build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$deb_c" \
  -DCMAKE_EXE_LINKER_FLAGS="$deb_ld" -DCMAKE_SHARED_LINKER_FLAGS="$deb_ld" \
  -DCMAKE_MODULE_LINKER_FLAGS="$deb_ld"
# The ASan+UBSan build, the fuzz build, its harnesses' smoke run and the
# packages go beside the RelWithDebInfo tests, on the CPU those leave idle
# (the tests wait on devices and timers: about a quarter of the 2 cores),
# under SCHED_IDLE and nice 19, so a test that wants a core gets it first;
# the sanitizer build first, which the next stage needs. Their output is
# printed when the tests end; a failure of any fails the run. Nothing runs
# beside the ASan+UBSan tests: the fuzz build there made their etcd miss
# its deadlines (tests/README.md). The two sanitizer builds keep line
# tables only (-g1: an ASan or UBSan report still names file and line),
# which took a quarter off the ASan+UBSan build's CPU (78 -> 59 s of user
# time) and 57 MB off what it writes.
asan_build() {
  stage "build-asan (beside the tests)"
  build build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-g1 -DOCSD_SANITIZE=ON \
    -DOCSD_BENCH=OFF
}
late_stages() {
  if [ "$sanitize" = 1 ]; then
    asan_build
  fi
  if [ "$fuzz" = 1 ]; then
    stage "build-fuzz (beside the tests)"
    fuzz_build "$fuzz_seconds"
    fuzz_run
  fi
  if [ "$packages" = 1 ]; then
    stage "packages (beside the tests)"
    bash tests/packages.sh "$top" "$top/build"
  fi
}
late_log=$top/build/late-stages.log
# the subshell lowers its own priority first: all it starts inherits it
(renice -n 19 -p "$BASHPID" >/dev/null && chrt -i -p 0 "$BASHPID" && late_stages) \
  >"$late_log" 2>&1 &
late=$!
tests_rc=0
tests $((jobs + 2)) build bench || tests_rc=$?
late_rc=0
wait "$late" || late_rc=$?
stage "the stages beside the tests ended (their output follows)"
cat "$late_log"
[ "$tests_rc" = 0 ] || exit "$tests_rc"
[ "$late_rc" = 0 ] || { echo "tests/run.sh: the ASan+UBSan build, the fuzz harnesses or the packages failed" >&2; exit "$late_rc"; }
if [ "$release" = 1 ]; then
  build build-release -DCMAKE_BUILD_TYPE=Release
fi
if [ "$sanitize" = 1 ]; then
  # A 32 MB quarantine (freed memory held back from reuse, so that a
  # use-after-free lands on poisoned memory) rather than ASan's 256: a
  # process's fresh allocations keep touching new pages until the
  # quarantine is full, and page faults are the costliest thing on this
  # VM. Four devsim-heavy tests: 1.66 M page faults -> 1.07 M, CPU 151 s ->
  # 134 s (means of two runs each way); a free is still caught by any use
  # in the next 32 MB freed.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=32 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    LSAN_OPTIONS=suppressions="$top/tests/lsan.supp" tests $((jobs + 1)) build-asan 'bench|source'
fi
if [ "$bench" = 1 ]; then
  (cd build && ctest --output-on-failure -L bench)
fi
