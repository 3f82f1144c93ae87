"""Processes sharing queues through the Python package: producers in other processes, a
consumer here; every message once, each group in order (R1, R3)."""

import multiprocessing as mp
import os
import time

import shmfifo


def produce(path, pid, groups, n):
    q = shmfifo.Queue.open(path)
    for i in range(n):
        g = i % groups
        q.send(f"p{pid}-g{g}", f"p{pid}-g{g}:{i // groups}", dedup_id=f"{pid}-{i}")
    q.close()


def consume(path, out):
    q = shmfifo.Queue.open(path)
    seen = []
    while True:
        got = q.receive(10, wait=1)
        if not got:
            break
        for m in got:
            # Stamped before the delete: a group's next message can only be received after
            # it (R3), and CLOCK_MONOTONIC is one clock for every process of the host.
            seen.append((time.monotonic_ns(), m.group_id, m.body))
            m.delete()
    out.put(seen)


def test_producer_and_consumer_processes(qdir):
    path = os.path.join(qdir, "mp.fifo")
    shmfifo.Queue.create(path, max_groups=256).close()
    ctx = mp.get_context("spawn")
    producers = [ctx.Process(target=produce, args=(path, p, 4, 200)) for p in range(3)]
    out = ctx.Queue()
    consumers = [ctx.Process(target=consume, args=(path, out)) for _ in range(2)]
    for p in producers + consumers:
        p.start()
    seen = [out.get(timeout=60) for _ in consumers]
    for p in producers + consumers:
        p.join(timeout=60)
        assert p.exitcode == 0
    everything = [x for s in seen for x in s]
    assert len(everything) == 600 and len({(g, b) for _, g, b in everything}) == 600
    by_group = {}
    for stamp, g, body in sorted(everything):
        by_group.setdefault(g, []).append(int(body.rsplit(":", 1)[1]))
    assert len(by_group) == 12
    for g, ks in by_group.items():
        assert ks == list(range(50)), f"group {g} delivered out of order: {ks}"
