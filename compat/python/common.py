"""Shared workload definition and checks (same as compat/go/common.go)."""
import sys
import time

MAIN_PARTITIONS = 6
TXN_PARTITIONS = 3
N_MAIN = 2000
N_RESUME = 200
N_TXN = 100


class Rec:
    __slots__ = ("seq", "partition")

    def __init__(self, seq, partitions):
        self.seq = seq
        self.partition = (seq % 50) % partitions

    @property
    def key(self):
        return ("k%d" % (self.seq % 50)).encode()

    @property
    def value(self):
        return str(self.seq).encode()


def gen(lo, hi, partitions):
    return [Rec(s, partitions) for s in range(lo, hi)]


class Limit(Exception):
    """A step the client cannot do (its own limitation)."""


def parse_got(value, partition, offset):
    try:
        return (int(value.decode()), partition, offset)
    except Exception:
        raise AssertionError("unexpected value %r at partition %d offset %d" % (value, partition, offset))


def verify(sent, members):
    """members: list (one per group member) of lists of (seq, partition, offset)
    in consumption order. Nothing lost, duplicated or extra; per partition in
    send order; one member per partition."""
    want = {r.seq: r for r in sent}
    per_part_want = {}
    for r in sent:
        per_part_want.setdefault(r.partition, []).append(r.seq)
    seen, owner, per_part_got, last_off = set(), {}, {}, {}
    problems = []

    def add(msg):
        if len(problems) < 8:
            problems.append(msg)

    for m, gots in enumerate(members):
        for seq, part, off in gots:
            r = want.get(seq)
            if r is None:
                add("unexpected record seq %d (partition %d offset %d)" % (seq, part, off))
                continue
            if seq in seen:
                add("duplicate record seq %d (partition %d offset %d)" % (seq, part, off))
                continue
            if r.partition != part:
                add("record seq %d sent to partition %d, read from %d" % (seq, r.partition, part))
            seen.add(seq)
            if part in owner and owner[part] != m:
                add("partition %d read by members %d and %d" % (part, owner[part], m))
            owner[part] = m
            if part in last_off and off <= last_off[part]:
                add("partition %d offsets not increasing: %d after %d" % (part, off, last_off[part]))
            last_off[part] = off
            per_part_got.setdefault(part, []).append(seq)
    missing = len(want) - len(seen & set(want))
    if missing:
        add("%d of %d records lost" % (missing, len(sent)))
    for p, w in per_part_want.items():
        g = per_part_got.get(p, [])
        for i, (a, b) in enumerate(zip(g, w)):
            if a != b:
                add("partition %d: record #%d is seq %d, sent order says %d" % (p, i, a, b))
                break
    if problems:
        raise AssertionError("; ".join(problems))


def parse_expect(s):
    if not s or s == "-":
        return None
    items = []
    for it in s.split(","):
        host, _, ports = it.strip().rpartition(":")
        lo, _, hi = ports.partition("-")
        items.append((host, int(lo), int(hi or lo)))
    return items


def check_addrs(expect, addrs):
    if not addrs:
        raise AssertionError("client reported no broker addresses")
    bad = []
    for a in sorted(addrs):
        host, _, port = a.rpartition(":")
        if not any(h == host and lo <= int(port) <= hi for h, lo, hi in expect):
            bad.append(a)
    if bad:
        raise AssertionError("client learned addresses outside the proxy: %s (all: %s)" % (bad, sorted(addrs)))


class Runner:
    def __init__(self, client):
        self.client = client
        self.failed = []
        self.limits = []
        self.started = time.monotonic()

    def note(self, step, why):
        print("LIMIT %s: %s" % (step, why), flush=True)
        self.limits.append("%s: %s" % (step, why))

    def step(self, name, fn):
        t = time.monotonic()
        try:
            fn()
        except Limit as e:
            self.note(name, str(e))
            return False
        except Exception as e:  # noqa: BLE001 - report any failure of the step
            msg = "%s: %s" % (type(e).__name__, e) if not isinstance(e, AssertionError) else str(e)
            print("FAIL %s: %s (%.3fs)" % (name, msg, time.monotonic() - t), flush=True)
            self.failed.append("%s: %s" % (name, msg))
            return False
        print("STEP %s ok (%.3fs)" % (name, time.monotonic() - t), flush=True)
        return True

    def finish(self):
        d = time.monotonic() - self.started
        if self.failed:
            print("RESULT fail %s (%.1fs): %s" % (self.client, d, " | ".join(self.failed)), flush=True)
            sys.exit(1)
        if self.limits:
            print("RESULT pass %s (%.1fs) with limitations: %s" % (self.client, d, " | ".join(self.limits)), flush=True)
        else:
            print("RESULT pass %s (%.1fs)" % (self.client, d), flush=True)
        sys.exit(0)


def deadline(seconds):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() < end
