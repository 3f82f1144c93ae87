"""The same boto3 program, unchanged, against boto3 on a local SQS server (moto's server
mode, on 127.0.0.1) and against shmfifo's client: both give the same results. moto stands in
for Amazon SQS, which the tests cannot reach."""

import os
import socket
import subprocess
import sys
import time

import pytest

import shmfifo
from conftest import boto3_client, serve
from test_client import fifo_program

import boto3  # installed with moto[server] by ci/python.sh


@pytest.fixture(scope="module")
def moto_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = os.path.join(os.path.dirname(sys.executable), "moto_server")
    p = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        p.kill()
        pytest.fail("moto_server did not start")
    yield url
    p.terminate()
    p.wait(timeout=10)


def test_the_same_program_on_boto3_and_on_shmfifo(moto_endpoint, qdir):
    sqs = boto3.client(
        "sqs",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    on_sqs = fifo_program(sqs)
    on_shm = fifo_program(shmfifo.client("sqs", directory=qdir))
    assert on_sqs == on_shm
    assert len(on_shm["seen"]) == 5
    # And through `shmfifo serve`, by boto3 itself.
    with serve(qdir) as endpoint:
        assert fifo_program(boto3_client(endpoint)) == on_sqs
