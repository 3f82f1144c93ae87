"""`shmfifo serve`: SQS's HTTP API on local queues, through boto3, the aws CLI and raw HTTP
(both wire protocols), sharing the queues with the library (rule ids from SQS-FIFO.md)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

import pytest

import shmfifo
from conftest import boto3_client, serve

NS = {"q": "http://queue.amazonaws.com/doc/2012-11-05/"}


@pytest.fixture
def endpoint(qdir):
    with serve(qdir) as e:
        yield e


def test_sdk_to_library_and_back(endpoint, qdir):
    sqs = boto3_client(endpoint)
    url = sqs.create_queue(QueueName="bridge.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    assert url == endpoint + "/000000000000/bridge.fifo"
    sqs.send_message(QueueUrl=url, MessageBody="from boto3", MessageGroupId="g", MessageDeduplicationId="1")
    # The same queue through the library, at shared-memory speed.
    with shmfifo.Queue.open(os.path.join(qdir, "bridge.fifo")) as q:
        [m] = q.receive(wait=5)
        assert m.body == "from boto3" and m.group_id == "g"
        m.delete()
        q.send("g", "from the library", dedup_id="2")
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in got] == ["from the library"]


def test_the_aws_cli(endpoint):
    aws = os.path.join(os.path.dirname(sys.executable), "aws")
    env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION="us-east-1")

    def run(*args):
        out = subprocess.run([aws, "--endpoint-url", endpoint, "--output", "json", "sqs", *args], env=env, capture_output=True, text=True)
        return out.returncode, out.stdout, out.stderr

    rc, out, err = run("create-queue", "--queue-name", "cli.fifo", "--attributes", "FifoQueue=true,ContentBasedDeduplication=true")
    assert rc == 0, err
    url = json.loads(out)["QueueUrl"]
    rc, out, err = run("send-message", "--queue-url", url, "--message-body", "hello", "--message-group-id", "g")
    assert rc == 0, err
    assert json.loads(out)["SequenceNumber"].isdigit()
    rc, out, err = run("receive-message", "--queue-url", url, "--attribute-names", "All")
    assert rc == 0, err
    [m] = json.loads(out)["Messages"]
    assert m["Body"] == "hello" and m["Attributes"]["MessageGroupId"] == "g"
    rc, out, err = run("delete-message", "--queue-url", url, "--receipt-handle", m["ReceiptHandle"])
    assert rc == 0, err
    # An error as the CLI shows SQS's: the query code and message (exit 255 in CLI v1, 254
    # in v2).
    rc, out, err = run("get-queue-url", "--queue-name", "missing.fifo")
    assert rc in (254, 255), err
    assert "(AWS.SimpleQueueService.NonExistentQueue)" in err and "The specified queue does not exist." in err, err


def post_form(endpoint, params, path="/"):
    data = urllib.parse.urlencode(params).encode()
    req = urllib.request.Request(endpoint + path, data=data, headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, ET.fromstring(r.read())
    except urllib.error.HTTPError as e:
        return e.code, ET.fromstring(e.read())


def test_the_query_protocol(endpoint):
    st, x = post_form(endpoint, {"Action": "CreateQueue", "QueueName": "xml.fifo", "Attribute.1.Name": "FifoQueue", "Attribute.1.Value": "true"})
    assert st == 200
    url = x.find("q:CreateQueueResult/q:QueueUrl", NS).text
    st, x = post_form(endpoint, {
        "Action": "SendMessage", "QueueUrl": url, "MessageBody": "a<b", "MessageGroupId": "g",
        "MessageDeduplicationId": "1", "MessageAttribute.1.Name": "k",
        "MessageAttribute.1.Value.StringValue": "v", "MessageAttribute.1.Value.DataType": "String",
    })
    assert st == 200 and x.find("q:SendMessageResult/q:SequenceNumber", NS).text.isdigit()
    # The queue named by the request path, as older SDKs do.
    st, x = post_form(endpoint, {"Action": "ReceiveMessage", "AttributeName.1": "All", "MessageAttributeName.1": "All"}, path="/000000000000/xml.fifo")
    assert st == 200
    m = x.find("q:ReceiveMessageResult/q:Message", NS)
    assert m.find("q:Body", NS).text == "a<b"
    attrs = {a.find("q:Name", NS).text: a.find("q:Value", NS).text for a in m.findall("q:Attribute", NS)}
    assert attrs["MessageGroupId"] == "g" and attrs["ApproximateReceiveCount"] == "1"
    ma = m.find("q:MessageAttribute", NS)
    assert ma.find("q:Name", NS).text == "k" and ma.find("q:Value/q:StringValue", NS).text == "v"
    st, x = post_form(endpoint, {"Action": "DeleteMessageBatch", "QueueUrl": url,
                                 "DeleteMessageBatchRequestEntry.1.Id": "a",
                                 "DeleteMessageBatchRequestEntry.1.ReceiptHandle": m.find("q:ReceiptHandle", NS).text,
                                 "DeleteMessageBatchRequestEntry.2.Id": "b",
                                 "DeleteMessageBatchRequestEntry.2.ReceiptHandle": "junk"})
    assert st == 200
    assert x.find("q:DeleteMessageBatchResult/q:DeleteMessageBatchResultEntry/q:Id", NS).text == "a"
    assert x.find("q:DeleteMessageBatchResult/q:BatchResultErrorEntry/q:Code", NS).text == "ReceiptHandleIsInvalid"
    # Errors: SQS's XML, with its codes.
    st, x = post_form(endpoint, {"Action": "GetQueueUrl", "QueueName": "none.fifo"})
    assert st == 400
    assert x.find("q:Error/q:Code", NS).text == "AWS.SimpleQueueService.NonExistentQueue"
    assert x.find("q:Error/q:Type", NS).text == "Sender"
    st, x = post_form(endpoint, {"Action": "NoSuchAction"})
    assert st == 400 and x.find("q:Error/q:Code", NS).text == "InvalidAction"
    st, x = post_form(endpoint, {"Action": "SendMessage", "QueueUrl": url, "MessageGroupId": "g"})
    assert st == 400 and x.find("q:Error/q:Code", NS).text == "MissingParameter"
    # A GET with the parameters in the query string.
    with urllib.request.urlopen(endpoint + "/?" + urllib.parse.urlencode({"Action": "ListQueues"}), timeout=30) as r:
        x = ET.fromstring(r.read())
    assert x.find("q:ListQueuesResult/q:QueueUrl", NS).text == url


def raw_json(endpoint, target, body, extra=None):
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": target}
    headers.update(extra or {})
    req = urllib.request.Request(endpoint + "/", data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read() or b"{}")


def test_bad_requests_get_sqs_errors_and_the_server_stays_up(endpoint):
    st, h, b = raw_json(endpoint, "AmazonSQS.ListQueues", b"{not json")
    assert st == 400 and b["__type"].endswith("SerializationException")
    st, h, b = raw_json(endpoint, "AmazonSQS.Frobnicate", b"{}")
    assert st == 400 and h["x-amzn-query-error"] == "InvalidAction;Sender"
    st, h, b = raw_json(endpoint, "Other.ListQueues", b"{}")
    assert st == 400 and b["__type"].endswith("InvalidAction")
    st, h, b = raw_json(endpoint, "AmazonSQS.SendMessage", b'{"MessageBody": "x"}')
    assert st == 400 and h["x-amzn-query-error"] == "MissingParameter;Sender"
    st, h, b = raw_json(endpoint, "AmazonSQS.GetQueueUrl", b'{"QueueName": 7}')
    assert st == 400 and h["x-amzn-query-error"].startswith("InvalidParameterValue")
    st, h, b = raw_json(endpoint, "AmazonSQS.ListQueues", b" " * (5 << 20))
    assert st == 413
    # Still serving.
    st, h, b = raw_json(endpoint, "AmazonSQS.ListQueues", b"{}")
    assert st == 200


def test_long_polls_do_not_hold_a_thread_each(endpoint, qdir):
    sqs = boto3_client(endpoint, config=__import__("botocore.config").config.Config(max_pool_connections=60))
    url = sqs.create_queue(QueueName="lp.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    got = []

    def wait():
        r = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10)
        got.extend(m["Body"] for m in r.get("Messages", []))

    threads = [threading.Thread(target=wait) for _ in range(50)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    pid = [p for p in os.listdir("/proc") if p.isdigit() and _is_server(p, qdir)]
    assert len(pid) == 1
    with open(f"/proc/{pid[0]}/status") as f:
        server_threads = int(next(l for l in f if l.startswith("Threads:")).split()[1])
    # 50 waiting requests, far fewer threads (the runtime's workers, the watcher, a few idle
    # blocking-pool threads).
    assert server_threads < 40, server_threads
    for i in range(50):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId=f"g{i}", MessageDeduplicationId=str(i))
    for t in threads:
        t.join(timeout=30)
    assert sorted(got) == sorted(f"m{i}" for i in range(50))


def _is_server(pid, qdir):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return qdir.encode() in f.read() and b"serve" in open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False


def test_a_client_killed_mid_receive_loses_nothing(endpoint, qdir):
    sqs = boto3_client(endpoint)
    url = sqs.create_queue(QueueName="kill.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    host, port = endpoint.rsplit("//", 1)[1].split(":")
    body = json.dumps({"QueueUrl": url, "WaitTimeSeconds": 10}).encode()
    s = socket.create_connection((host, int(port)))
    s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
              b"X-Amz-Target: AmazonSQS.ReceiveMessage\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(0.3)
    s.close()  # the client goes away while its long poll waits
    time.sleep(0.2)
    sqs.send_message(QueueUrl=url, MessageBody="kept", MessageGroupId="g", MessageDeduplicationId="1")
    time.sleep(0.3)
    with shmfifo.Queue.open(os.path.join(qdir, "kill.fifo")) as q:
        [m] = q.receive()
        assert m.body == "kept" and m.receive_count == 1


def test_signatures_checked_when_asked(qdir):
    with serve(qdir, "--check-signature", "AKIDLOCAL:s3cret") as e:
        good = boto3_client(e, aws_access_key_id="AKIDLOCAL", aws_secret_access_key="s3cret")
        good.create_queue(QueueName="sig.fifo", Attributes={"FifoQueue": "true"})
        bad = boto3_client(e, aws_access_key_id="AKIDLOCAL", aws_secret_access_key="wrong")
        with pytest.raises(bad.exceptions.ClientError) as x:
            bad.list_queues()
        assert x.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
        other = boto3_client(e, aws_access_key_id="SOMEONE", aws_secret_access_key="s3cret")
        with pytest.raises(other.exceptions.ClientError) as x:
            other.list_queues()
        assert x.value.response["Error"]["Code"] == "InvalidClientTokenId"


def _botocore_signed(endpoint, body, headers, timestamp=None, secret="s3cret"):
    """A request signed by botocore's own SigV4 signer, now or at `timestamp`
    (YYYYMMDDTHHMMSSZ): (url, body, headers) ready to send with any other body."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    req = AWSRequest(method="POST", url=endpoint + "/", data=body, headers=dict(headers))
    auth = SigV4Auth(Credentials("AKIDLOCAL", secret), "sqs", "us-east-1")
    if timestamp is None:
        auth.add_auth(req)
    else:
        # add_auth's own steps, with the clock it reads replaced by `timestamp`.
        req.context["timestamp"] = timestamp
        auth._modify_request_before_signing(req)
        canonical = auth.canonical_request(req)
        to_sign = auth.string_to_sign(req, canonical)
        auth._inject_signature_to_request(req, auth.signature(to_sign, req))
    p = req.prepare()
    return p.url, dict(p.headers)


def _send_raw(url, body, headers):
    r = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_signatures_cover_the_body_and_the_date(qdir):
    """A captured signed request carried any body (the client's X-Amz-Content-SHA256 was
    trusted), and a request signed for 2015 was accepted. Signed here by botocore itself."""
    import hashlib

    with serve(qdir, "--check-signature", "AKIDLOCAL:s3cret") as e:
        good = boto3_client(e, aws_access_key_id="AKIDLOCAL", aws_secret_access_key="s3cret")
        url = good.create_queue(QueueName="sig2.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        good.send_message(QueueUrl=url, MessageBody="keep", MessageGroupId="g", MessageDeduplicationId="1")
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        honest = b"Action=ListQueues"
        forged = urllib.parse.urlencode({"Action": "PurgeQueue", "QueueUrl": url}).encode()
        # Signed as botocore signs it: accepted.
        u, h = _botocore_signed(e, honest, form)
        status, out = _send_raw(u, honest, h)
        assert status == 200 and "sig2.fifo" in out, out
        # The same signature over another body: refused.
        status, out = _send_raw(u, forged, h)
        assert status == 403 and "SignatureDoesNotMatch" in out, out
        # With the signed body's hash claimed in X-Amz-Content-SHA256 (signed too): refused.
        claimed = dict(form, **{"X-Amz-Content-SHA256": hashlib.sha256(honest).hexdigest()})
        u, h = _botocore_signed(e, honest, claimed)
        assert _send_raw(u, honest, h)[0] == 200
        status, out = _send_raw(u, forged, h)
        assert status == 400 and "XAmzContentSHA256Mismatch" in out, out
        # UNSIGNED-PAYLOAD: refused.
        u, h = _botocore_signed(e, forged, dict(form, **{"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"}))
        assert _send_raw(u, forged, h)[0] == 403
        # Nothing was purged.
        attrs = good.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "1"
        # A request signed for 2015 (and one 20 minutes old): expired.
        old = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() - 20 * 60))
        for stamp in ["20150830T123600Z", old]:
            u, h = _botocore_signed(e, honest, form, timestamp=stamp)
            status, out = _send_raw(u, honest, h)
            assert status == 400 and "RequestExpired" in out, (stamp, out)
        # Five minutes old is within AWS's skew.
        recent = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() - 5 * 60))
        u, h = _botocore_signed(e, honest, form, timestamp=recent)
        assert _send_raw(u, honest, h)[0] == 200
        # Another region's scope: refused.
        other = boto3_client(e, region_name="eu-west-1", aws_access_key_id="AKIDLOCAL", aws_secret_access_key="s3cret")
        with pytest.raises(other.exceptions.ClientError) as x:
            other.list_queues()
        assert x.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


def _ended_task(sqs, source_arn):
    """The source's latest move task once it no longer runs (or as it is after 30 s)."""
    deadline = time.time() + 30
    while True:
        [t] = sqs.list_message_move_tasks(SourceArn=source_arn)["Results"]
        if t["Status"] != "RUNNING" or time.time() > deadline:
            return t
        time.sleep(0.1)


def _dead_letter_pair(sqs, dlq_name, src_name):
    """A dead-letter queue and a source whose RedrivePolicy names it (one receive): the dead-letter
    queue's URL and ARN, and the source's URL."""
    dlq = sqs.create_queue(QueueName=f"{dlq_name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    src = sqs.create_queue(QueueName=f"{src_name}.fifo", Attributes={
        "FifoQueue": "true", "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})["QueueUrl"]
    return dlq, dlq_arn, src


def test_dead_letter_move_tasks(endpoint):
    # X1 then X6 through StartMessageMoveTask / ListMessageMoveTasks.
    sqs = boto3_client(endpoint)
    dlq, dlq_arn, src = _dead_letter_pair(sqs, "dlq", "src")
    for i in range(3):
        sqs.send_message(QueueUrl=src, MessageBody=f"p{i}", MessageGroupId=f"g{i}", MessageDeduplicationId=str(i))
    sqs.receive_message(QueueUrl=src, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert "Messages" not in sqs.receive_message(QueueUrl=src, MaxNumberOfMessages=10)
    assert sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"] == "3"
    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    assert handle
    t = _ended_task(sqs, dlq_arn)
    assert t["Status"] == "COMPLETED" and t["ApproximateNumberOfMessagesMoved"] == 3
    back = sqs.receive_message(QueueUrl=src, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in back) == ["p0", "p1", "p2"]


def test_a_move_task_that_leaves_messages_behind_says_so(endpoint):
    # X6: messages sent to the dead-letter queue directly name no source; a task without a
    # DestinationArn leaves them. It answered COMPLETED, moved 0, and no word why.
    sqs = boto3_client(endpoint)
    dlq, dlq_arn, _ = _dead_letter_pair(sqs, "ldlq", "lsrc")
    for i in range(3):
        sqs.send_message(QueueUrl=dlq, MessageBody=f"d{i}", MessageGroupId="g", MessageDeduplicationId=str(i))
    sqs.start_message_move_task(SourceArn=dlq_arn)
    t = _ended_task(sqs, dlq_arn)
    assert t["Status"] == "FAILED" and t["ApproximateNumberOfMessagesMoved"] == 0, t
    assert "3 messages stayed" in t["FailureReason"] and "DestinationArn" in t["FailureReason"], t
    attrs = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])
    assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "3"


def test_a_running_move_task_reports_its_progress_and_its_cancel_the_count(endpoint):
    # X6: ListMessageMoveTasks shows a running task's messages moved so far (it said 0 until
    # the task ended), and CancelMessageMoveTask answers them (it answered 0).
    sqs = boto3_client(endpoint)
    dlq, dlq_arn, _ = _dead_letter_pair(sqs, "pdlq", "psrc")
    dst = sqs.create_queue(QueueName="pdst.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dst_arn = sqs.get_queue_attributes(QueueUrl=dst, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for i in range(40):
        sqs.send_message(QueueUrl=dlq, MessageBody=f"m{i}", MessageGroupId=f"g{i}", MessageDeduplicationId=str(i))
    handle = sqs.start_message_move_task(
        SourceArn=dlq_arn, DestinationArn=dst_arn, MaxNumberOfMessagesPerSecond=10)["TaskHandle"]
    deadline = time.time() + 30
    while True:
        [t] = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        assert t["Status"] == "RUNNING", t
        if t["ApproximateNumberOfMessagesMoved"] >= 3 or time.time() > deadline:
            break
        time.sleep(0.1)
    seen = t["ApproximateNumberOfMessagesMoved"]
    assert 3 <= seen < 40, t
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]
    assert seen <= moved < 40
    # Cancelled once: CANCELLING until its redrive ends, and no second cancel (as SQS).
    with pytest.raises(sqs.exceptions.ClientError) as e:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert e.value.response["Error"]["Code"] == "ResourceNotFoundException"
    while True:
        [t] = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        if t["Status"] not in ("RUNNING", "CANCELLING") or time.time() > deadline:
            break
        assert t["Status"] == "CANCELLING" and "TaskHandle" not in t, t
        time.sleep(0.05)
    # The message being moved when the cancel came is moved too.
    assert t["Status"] == "CANCELLED" and moved <= t["ApproximateNumberOfMessagesMoved"] <= moved + 1, t
    left = sqs.get_queue_attributes(QueueUrl=dst, AttributeNames=["ApproximateNumberOfMessages"])
    assert int(left["Attributes"]["ApproximateNumberOfMessages"]) == t["ApproximateNumberOfMessagesMoved"]
