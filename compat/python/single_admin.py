"""kafka-python's admin client through the single endpoint (`inorder dev
--topology single`, or `serve --topology single`): eight fresh
KafkaAdminClients each create a topic of 4 partitions, while another
client bootstraps again and again as old clients do, with Metadata v0,
whose answer carries no controller id. Every CreateTopics must be
answered by the controller at once (kafka-python would retry a
NOT_CONTROLLER answer once, which would hide the proxy sending it to
another broker; the check counts such answers and fails on any), and a
producer must then see the 4 partitions, not a topic it auto-created.

    single_admin.py BOOTSTRAP
"""
import sys
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import errors as Errors
from kafka.admin import NewTopic

TOPICS = 8
PARTITIONS = 4

not_controller = []
orig = getattr(KafkaAdminClient, "_send_request_to_controller", None)
if orig is not None:
    async def counting(self, request, get_errors_fn=lambda r: (), *args, **kwargs):
        def errors(response):
            found = list(get_errors_fn(response))
            if Errors.NotControllerError in found:
                not_controller.append(type(request).__name__)
            return found
        return await orig(self, request, errors, *args, **kwargs)
    KafkaAdminClient._send_request_to_controller = counting
else:
    print("INFO kafka-python has no _send_request_to_controller: NOT_CONTROLLER answers it retried are not counted", flush=True)


def old_bootstraps(boot, stop, errors):
    """Metadata v0 requests until stop, as a client pinned to an old
    protocol sends them."""
    try:
        while not stop.is_set():
            c = KafkaConsumer(bootstrap_servers=boot, api_version=(0, 9), client_id="single-admin-old")
            c.topics()
            c.close()
    except Exception as e:  # noqa: BLE001
        errors.append("the Metadata v0 client: %s: %s" % (type(e).__name__, e))


def main():
    boot = sys.argv[1]
    prefix = "single-admin-%d" % int(time.time() * 1000)
    failures = []
    stop = threading.Event()
    old = threading.Thread(target=old_bootstraps, args=(boot, stop, failures), daemon=True)
    old.start()
    try:
        for i in range(TOPICS):
            topic = "%s-%d" % (prefix, i)
            admin = KafkaAdminClient(bootstrap_servers=boot, client_id="single-admin", request_timeout_ms=20000)
            try:
                resp = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)], timeout_ms=20000)
                topics = resp["topics"] if isinstance(resp, dict) else resp.to_object()["topics"]
                bad = [t for t in topics if t["error_code"] != 0]
                if bad:
                    failures.append("%s: %s" % (topic, bad))
            except Exception as e:  # noqa: BLE001
                failures.append("%s: %s: %s" % (topic, type(e).__name__, e))
            finally:
                admin.close()
            prod = KafkaProducer(bootstrap_servers=boot, client_id="single-admin-producer", max_block_ms=20000)
            try:
                prod.send(topic, b"x").get(timeout=20)
                got = len(prod.partitions_for(topic) or ())
                if got != PARTITIONS:
                    failures.append("%s has %d partitions, want the %d asked for" % (topic, got, PARTITIONS))
            finally:
                prod.close(timeout=10)
    finally:
        stop.set()
        old.join(30)
    if not_controller:
        failures.append("%d answers NOT_CONTROLLER (%s), which kafka-python retried" % (len(not_controller), ", ".join(sorted(set(not_controller)))))
    for f in failures:
        print("FAIL " + f, flush=True)
    print("single-admin: %d topics created, %d failures" % (TOPICS, len(failures)), flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
