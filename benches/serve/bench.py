#!/usr/bin/env python3
"""Requests per second and p50 per request through `shmfifo serve` beside moto's server,
measured the same way in the same run: one boto3 client, batches of 10 messages of 64 B sent
(SendMessageBatch), then received (ReceiveMessage, 10 at a time) and deleted
(DeleteMessageBatch). Rounds alternate between the servers, so both meet the same machine.

Usage (after `bash ci/python.sh`, which makes target/pyvenv with boto3 and moto[server]):
    target/pyvenv/bin/python benches/serve/bench.py [--batches 300] [--rounds 3]
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import boto3
from botocore.config import Config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_shmfifo(directory):
    exe = os.environ.get("SHMFIFO_BIN", os.path.join(ROOT, "target", "release", "shmfifo"))
    p = subprocess.Popen([exe, "serve", "--port", "0", "--dir", directory], stdout=subprocess.PIPE, text=True)
    url = re.search(r"http://[0-9.]+:[0-9]+", p.stdout.readline()).group(0)
    return p, url


def start_moto():
    port = free_port()
    exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
    p = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.1)
    return p, f"http://127.0.0.1:{port}"


def client(url):
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x", config=Config(retries={"max_attempts": 0}))


def measure(sqs, name, batches):
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"})["QueueUrl"]
    body = "x" * 64
    send, recv = [], []
    t0 = time.perf_counter()
    for b in range(batches):
        entries = [{"Id": str(i), "MessageBody": body, "MessageGroupId": f"g{i}",
                    "MessageDeduplicationId": f"{b}-{i}"} for i in range(10)]
        t = time.perf_counter()
        r = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        send.append(time.perf_counter() - t)
        assert not r.get("Failed"), r["Failed"]
    send_wall = time.perf_counter() - t0
    got = 0
    t0 = time.perf_counter()
    while got < batches * 10:
        t = time.perf_counter()
        msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if msgs:
            sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)])
        recv.append(time.perf_counter() - t)
        got += len(msgs)
    recv_wall = time.perf_counter() - t0
    sqs.delete_queue(QueueUrl=url)
    return {
        "send req/s": len(send) / send_wall,
        "send p50 ms": statistics.median(send) * 1e3,
        "receive+delete pairs/s": len(recv) / recv_wall,
        "receive+delete p50 ms": statistics.median(recv) * 1e3,
        "messages/s": got / (send_wall + recv_wall),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="shmfifo-serve-bench-", dir="/dev/shm")
    ps, shm_url = start_shmfifo(d)
    pm, moto_url = start_moto()
    results = {"shmfifo serve": [], "moto_server": []}
    try:
        for r in range(a.rounds):
            for label, url in (("shmfifo serve", shm_url), ("moto_server", moto_url)):
                results[label].append(measure(client(url), f"bench-{r}.fifo", a.batches))
    finally:
        for p in (ps, pm):
            p.terminate()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)
    keys = list(results["shmfifo serve"][0])
    print(f"boto3, batches of 10 × 64 B, {a.batches} batches, median of {a.rounds} interleaved rounds")
    print("| figure | shmfifo serve | moto_server | ratio |")
    print("|---|---|---|---|")
    for k in keys:
        s = statistics.median(x[k] for x in results["shmfifo serve"])
        m = statistics.median(x[k] for x in results["moto_server"])
        print(f"| {k} | {s:.1f} | {m:.1f} | {s / m:.2f}× |")


if __name__ == "__main__":
    main()
