# ocsctl_expect.sh - the checks shared by test_ocsctl.sh and
# test_ocsctl_replicas.sh; sourced, not run. The caller sets $ocsctl (the
# binary) and $work (a scratch directory); failures counts what failed.

failures=0
# expect CODE DESCRIPTION -- command...: runs ocsctl, checks the exit code,
# keeps stdout in $work/out and stderr in $work/err.
expect() {
  local want=$1 what=$2
  shift 3
  local got=0
  "$ocsctl" "$@" >"$work/out" 2>"$work/err" || got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, want $want"
    sed 's/^/  stdout: /' "$work/out"
    sed 's/^/  stderr: /' "$work/err"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}
# has FILE PATTERN DESCRIPTION / hasnt FILE PATTERN DESCRIPTION: FILE (out
# or err, under $work) contains / does not contain a fixed string.
has() {
  if ! grep -qF -- "$2" "$work/$1"; then
    echo "FAIL: $3: '$2' not in $1:"
    sed 's/^/  /' "$work/$1"
    failures=$((failures + 1))
  fi
}
hasnt() {
  if grep -qF -- "$2" "$work/$1"; then
    echo "FAIL: $3: '$2' in $1:"
    sed 's/^/  /' "$work/$1"
    failures=$((failures + 1))
  fi
}
