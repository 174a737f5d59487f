#!/usr/bin/env bash
# Starts again one node of a Kafka that start.sh formatted and that was
# stopped or killed since: `node.sh single|cluster NODE`. Keeps its data,
# waits until its broker port opens, and prints its pid on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
mode="$1" n="$2"
d="$KAFKA_RUN_DIR/$mode/node$n"
[ -f "$d/server.properties" ] || { klog "node $n of $mode was never formatted in $KAFKA_RUN_DIR"; exit 1; }
if [ -f "$d/pid" ] && pid_alive "$(cat "$d/pid")"; then klog "node $n is running (pid $(cat "$d/pid"))"; exit 1; fi
launch_node "$mode" "$n"
pid=$(cat "$d/pid")
p=$(broker_port "$mode" "$n")
deadline=$((SECONDS + KAFKA_START_TIMEOUT))
until port_open "$p"; do
  pid_alive "$pid" || { klog "node $n exited during startup"; tail -n 25 "$d/logs/server.log" >&2; exit 1; }
  [ $SECONDS -lt $deadline ] || { klog "node $n did not open port $p within ${KAFKA_START_TIMEOUT}s"; exit 1; }
  sleep 0.3
done
echo "$pid"
