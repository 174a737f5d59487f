#!/usr/bin/env bash
# Installs Apache Kafka ($KAFKA_VERSION, default 4.1.1) with Maven into
# ${INORDER_CACHE:-$HOME/.cache/inorder}/kafka-<ver>/libs. Idempotent.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
kafka_install
echo "$KAFKA_HOME"
