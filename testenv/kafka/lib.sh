# shellcheck shell=bash
# Common settings and functions for the Apache Kafka test environment.
# Sourced by install.sh, start.sh, stop.sh. Not meant to be executed.
#
# Fixed loopback ports (documented in testenv/kafka/README.md):
#   single node  : node.id 1, broker 127.0.0.1:19092, controller 127.0.0.1:19093
#   three nodes  : node.id 1,2,3, brokers 127.0.0.1:29092,29093,29094,
#                  controllers 127.0.0.1:29192,29193,29194

TESTENV_KAFKA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
INORDER_CACHE="${INORDER_CACHE:-$HOME/.cache/inorder}"
KAFKA_HOME="${KAFKA_HOME:-$INORDER_CACHE/kafka-$KAFKA_VERSION}"
KAFKA_LIBS="$KAFKA_HOME/libs"
# Runtime state (data dirs, logs, pid files). Wiped by start.sh.
KAFKA_RUN_DIR="${KAFKA_RUN_DIR:-${TMPDIR:-/tmp}/inorder-kafka}"
KAFKA_HEAP="${KAFKA_HEAP:--Xms128m -Xmx384m}"
KAFKA_CLUSTER_ID="${KAFKA_CLUSTER_ID:-aW5vcmRlci10ZXN0ZW52MQ}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-60}"

SINGLE_BROKER_PORT=19092
SINGLE_CONTROLLER_PORT=19093
CLUSTER_BROKER_BASE=29091     # node N -> 29091+N
CLUSTER_CONTROLLER_BASE=29191 # node N -> 29191+N

klog() { printf '[testenv/kafka %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# mode -> node ids
mode_nodes() {
  case "$1" in
    single) echo 1 ;;
    cluster) echo 1 2 3 ;;
    *) klog "unknown mode '$1' (single|cluster)"; return 2 ;;
  esac
}

broker_port() { # mode node
  if [ "$1" = single ]; then echo $SINGLE_BROKER_PORT; else echo $((CLUSTER_BROKER_BASE + $2)); fi
}
controller_port() { # mode node
  if [ "$1" = single ]; then echo $SINGLE_CONTROLLER_PORT; else echo $((CLUSTER_CONTROLLER_BASE + $2)); fi
}

# Comma-separated bootstrap list for a mode.
bootstrap_for() {
  local mode=$1 out="" n
  for n in $(mode_nodes "$mode"); do
    out="${out:+$out,}127.0.0.1:$(broker_port "$mode" "$n")"
  done
  echo "$out"
}

kafka_installed() {
  [ -f "$KAFKA_HOME/.complete" ] && ls "$KAFKA_LIBS"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1
}

# Installs Kafka's jars with Maven into $KAFKA_LIBS (idempotent).
kafka_install() {
  if kafka_installed; then
    klog "Kafka $KAFKA_VERSION already installed in $KAFKA_HOME"
    return 0
  fi
  command -v mvn >/dev/null || { klog "mvn not found"; return 1; }
  command -v java >/dev/null || { klog "java not found"; return 1; }
  local work="$KAFKA_HOME/.build"
  rm -rf "$KAFKA_LIBS" "$work"
  mkdir -p "$work"
  cp "$TESTENV_KAFKA_DIR/pom.xml" "$work/pom.xml"
  klog "installing Apache Kafka $KAFKA_VERSION with Maven into $KAFKA_LIBS"
  if ! (cd "$work" && mvn -B -q -Dkafka.version="$KAFKA_VERSION" -Dlibs.dir="$KAFKA_LIBS" package) >"$KAFKA_HOME/install.log" 2>&1; then
    klog "Maven install failed; log: $KAFKA_HOME/install.log"
    tail -n 40 "$KAFKA_HOME/install.log" >&2
    return 1
  fi
  rm -rf "$work"
  echo "$KAFKA_VERSION" >"$KAFKA_HOME/.complete"
  klog "installed $(ls "$KAFKA_LIBS" | wc -l) jars"
}

# Writes server.properties + log4j2 config for one node.
write_node_config() { # mode node dir
  local mode=$1 n=$2 dir=$3 voters="" m rf=1 minisr=1
  for m in $(mode_nodes "$mode"); do
    voters="${voters:+$voters,}$m@127.0.0.1:$(controller_port "$mode" "$m")"
  done
  if [ "$mode" = cluster ]; then rf=3; minisr=2; fi
  mkdir -p "$dir/data" "$dir/logs"
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(broker_port "$mode" "$n"),CONTROLLER://127.0.0.1:$(controller_port "$mode" "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$mode" "$n")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=1
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$minisr
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$minisr
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
delete.topic.enable=true
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.retention.hours=1
log.segment.bytes=16777216
EOF
  cat >"$dir/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $dir/logs/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
EOF
}

kjava() { # runs java with Kafka's classpath
  java -cp "$KAFKA_LIBS/*" "$@"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Prints the log locations and the tail of each node's log.
show_logs() { # mode
  local n d
  for n in $(mode_nodes "$1"); do
    d="$KAFKA_RUN_DIR/$1/node$n"
    klog "node $n logs: $d/logs/server.log and $d/logs/stdout.log"
    for f in "$d/logs/stdout.log" "$d/logs/server.log"; do
      [ -f "$f" ] || continue
      echo "----- tail $f" >&2
      tail -n 25 "$f" >&2
    done
  done
}

pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
