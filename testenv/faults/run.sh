#!/usr/bin/env bash
# Runs the fault suite: builds inorder and the driver, then
# `faults -bin ... [flags]` (see testenv/faults/main.go and RELIABILITY.md).
# Whatever happens, the Kafka cluster it started is stopped on exit.
# Environment: KAFKA_RUN_DIR (default /tmp/faults-kafka), FAULTS_TIMEOUT
# (seconds for the whole run, default 1800; raise it for a long soak).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
export KAFKA_RUN_DIR="${KAFKA_RUN_DIR:-/tmp/faults-kafka}"
# the cluster's data is thrown away: a node that does not stop soon is killed
export KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-20}"
BIN="$(mktemp -d "${TMPDIR:-/tmp}/faults-bin.XXXXXX")"
cleanup() {
  KAFKA_RELAYED_LISTENER=1 bash "$ROOT/testenv/kafka/stop.sh" cluster >/dev/null 2>&1
  rm -rf "$BIN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$ROOT"
bash testenv/kafka/install.sh >/dev/null || exit 1
go build -o "$BIN/inorder" ./cmd/inorder && go build -o "$BIN/faults" ./testenv/faults || exit 1
# bounded: past FAULTS_TIMEOUT the driver gets SIGTERM, stops what it started
# and exits; 30 s later it is killed (its children die with it)
timeout -k 30 "${FAULTS_TIMEOUT:-1800}" "$BIN/faults" -root "$ROOT" -bin "$BIN/inorder" -kafka-run-dir "$KAFKA_RUN_DIR" "$@"
