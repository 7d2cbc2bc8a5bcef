# nb_server.sh - sourced by the shell tests of ocsctl (test_ocsctl.sh,
# test_completion.sh, test_ocsctl_replicas.sh): starts nb_test_server and
# reads the port it prints. The caller sets $server_bin and $work, and
# stops the server ($nb_server_pid).

# nb_server_start NAME ARGS...: nb_test_server ARGS in the background, its
# output in $work/NAME.out and .err; sets $port and $nb_server_pid; ends the
# test (exit 1, with the server's stderr) when no port shows within 5 s.
nb_server_start() {
  local name=$1
  shift
  "$server_bin" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  nb_server_pid=$!
  port=""
  for _ in $(seq 100); do
    # "|| true": the server may not have opened its output file yet (set -e)
    port=$(awk '/^port /{print $2}' "$work/$name.out" 2>/dev/null || true)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { echo "server $name did not start"; cat "$work/$name.err"; exit 1; }
}
