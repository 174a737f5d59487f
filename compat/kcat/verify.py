#!/usr/bin/env python3
"""Checks for the kcat workload (stdlib only; reuses compat/python/common.py).

    verify.py group|resume|committed|uncommitted-aborted|addrs ...
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from common import (MAIN_PARTITIONS, N_MAIN, N_RESUME, N_TXN, TXN_PARTITIONS, check_addrs, gen,  # noqa: E402
                    parse_expect, parse_got, verify)


def read(path):
    out = []
    with open(path, "rb") as f:
        for line in f:
            line = line.rstrip(b"\n")
            if not line:
                continue
            p, o, v = line.split(b" ", 2)
            out.append(parse_got(v, int(p), int(o)))
    return out


def main():
    what, args = sys.argv[1], sys.argv[2:]
    try:
        if what == "group":
            members = [read(a) for a in args]
            for i, m in enumerate(members):
                if not m:
                    raise AssertionError("group member %d received no records" % i)
            verify(gen(0, N_MAIN, MAIN_PARTITIONS), members)
        elif what == "resume":
            verify(gen(N_MAIN, N_MAIN + N_RESUME, MAIN_PARTITIONS), [read(args[0])])
        elif what == "committed":
            verify(gen(100000, 100000 + N_TXN, TXN_PARTITIONS) + gen(900000, 900000 + TXN_PARTITIONS, TXN_PARTITIONS),
                   [read(args[0])])
        elif what == "addrs":
            expect, md = parse_expect(args[0]), json.load(open(args[1]))
            addrs = {b["name"] for b in md.get("brokers", [])}
            # With COMPAT_HOSTS_FILE (the sni columns) librdkafka dials what
            # a name resolved to: those addresses were not learned.
            resolved = set()
            if os.environ.get("COMPAT_HOSTS_FILE"):
                for line in open(os.environ["COMPAT_HOSTS_FILE"]):
                    fields = line.split("#")[0].split()
                    if len(fields) > 1:
                        resolved.add(fields[0])
            for extra in args[2:]:
                if extra.rsplit(":", 1)[0] not in resolved:
                    addrs.add(extra)
            print("INFO addresses learned: %s" % sorted(addrs))
            check_addrs(expect, addrs)
    except AssertionError as e:
        print(e)
        sys.exit(1)


main()
