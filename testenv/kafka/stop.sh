#!/usr/bin/env bash
# Stops the Kafka started by start.sh: `stop.sh single|cluster|secure|secure-cluster|authz|audit|all`.
# SIGTERM to each node, waits up to $KAFKA_STOP_TIMEOUT s, then SIGKILL.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
mode="${1:-all}"
[ "$mode" = all ] && modes="$ALL_MODES" || modes="$mode"
rc=0
for m in $modes; do
  pids=()
  for n in $(mode_nodes "$m"); do
    f="$KAFKA_RUN_DIR/$m/node$n/pid"
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if pid_alive "$pid"; then kill -TERM "$pid" 2>/dev/null && pids+=("$pid"); fi
    rm -f "$f"
  done
  [ ${#pids[@]} -gt 0 ] || continue
  klog "stopping $m (pids ${pids[*]})"
  deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
  for pid in "${pids[@]}"; do
    while pid_alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.3; done
    if pid_alive "$pid"; then
      klog "pid $pid did not stop within ${KAFKA_STOP_TIMEOUT}s; killing"
      kill -KILL "$pid" 2>/dev/null; rc=1
    fi
  done
  klog "$m stopped"
done
exit $rc
