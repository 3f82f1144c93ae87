"""The boto3-shaped client: the same program boto3 users write for SQS FIFO, its dict shapes
and its error codes (rule ids from SQS-FIFO.md)."""

import hashlib
import json
import time

import pytest

import shmfifo
from conftest import boto3_client, serve


def fifo_program(sqs):
    """A small SQS FIFO program written against boto3's SQS client: it uses nothing but
    boto3's calls and answers. Returns what it observed."""
    url = sqs.create_queue(
        QueueName="orders.fifo",
        Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"},
    )["QueueUrl"]
    assert sqs.get_queue_url(QueueName="orders.fifo")["QueueUrl"] == url
    for i in range(3):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=f"order {i}",
            MessageGroupId="customer-1",
            MessageDeduplicationId=f"o-{i}",
        )
    batch = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "a", "MessageBody": "ticket 0", "MessageGroupId": "customer-2", "MessageDeduplicationId": "t-0"},
            {"Id": "b", "MessageBody": "ticket 1", "MessageGroupId": "customer-2", "MessageDeduplicationId": "t-1"},
        ],
    )
    seen = []
    while True:
        r = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            MessageSystemAttributeNames=["MessageGroupId", "SequenceNumber"],
        )
        msgs = r.get("Messages", [])
        if not msgs:
            break
        for m in msgs:
            seen.append((m["Attributes"]["MessageGroupId"], m["Body"]))
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)],
        )
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    errors = []
    try:
        sqs.get_queue_url(QueueName="missing.fifo")
    except sqs.exceptions.QueueDoesNotExist as e:
        errors.append(e.response["Error"]["Code"])
    try:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="x")
    except sqs.exceptions.ClientError as e:
        errors.append(e.response["Error"]["Code"])
    sqs.delete_queue(QueueUrl=url)
    return {
        "errors": errors,
        "batch_ok": sorted(e["Id"] for e in batch["Successful"]),
        "batch_failed": batch["Failed"],
        "seen": seen,
        "left": attrs["ApproximateNumberOfMessages"],
        "fifo": attrs["FifoQueue"],
    }


def test_a_boto3_program_runs_unchanged(qdir):
    got = fifo_program(shmfifo.client("sqs", directory=qdir, region_name="us-east-1"))
    assert got["batch_ok"] == ["a", "b"]
    assert got["batch_failed"] == []
    # R1: each group in order; every message once.
    assert [b for g, b in got["seen"] if g == "customer-1"] == ["order 0", "order 1", "order 2"]
    assert [b for g, b in got["seen"] if g == "customer-2"] == ["ticket 0", "ticket 1"]
    assert len(got["seen"]) == 5
    assert got["left"] == "0"
    assert got["fifo"] == "true"
    # S1 and the missing queue: SQS's codes, as boto3 raises them.
    assert got["errors"] == ["AWS.SimpleQueueService.NonExistentQueue", "MissingParameter"]


@pytest.fixture(params=["client", "serve"])
def sqs(request, qdir):
    """The same SQS calls two ways: shmfifo's boto3-shaped client on the library, and boto3
    itself against `shmfifo serve` (the SQS JSON protocol over HTTP) on the same kind of
    queues."""
    if request.param == "client":
        c = shmfifo.client("sqs", directory=qdir)
        yield c
        c.close()
    else:
        with serve(qdir) as endpoint:
            yield boto3_client(endpoint)


@pytest.fixture
def url(sqs):
    return sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]


def code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def test_send_answers_with_boto3s_shape(sqs, url):
    attrs = {"kind": {"DataType": "String", "StringValue": "x"}, "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}}
    r = sqs.send_message(QueueUrl=url, MessageBody="hello", MessageGroupId="g", MessageDeduplicationId="d", MessageAttributes=attrs)
    assert r["MD5OfMessageBody"] == hashlib.md5(b"hello").hexdigest()
    assert r["MD5OfMessageAttributes"] == shmfifo.md5_of_message_attributes(attrs)
    # The same digest SQS computes (a hand-checked vector: test_message_attribute_md5...).
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert len(r["MessageId"]) == 36 and r["SequenceNumber"].isdigit()
    m = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"])["Messages"][0]
    assert m["Body"] == "hello" and m["MD5OfBody"] == r["MD5OfMessageBody"]
    assert m["MessageAttributes"] == attrs
    assert m["MD5OfMessageAttributes"] == r["MD5OfMessageAttributes"]
    # M3: the FIFO system attributes, as strings.
    a = m["Attributes"]
    assert a["MessageGroupId"] == "g" and a["MessageDeduplicationId"] == "d"
    assert a["SequenceNumber"] == r["SequenceNumber"] and a["ApproximateReceiveCount"] == "1"
    assert abs(int(a["SentTimestamp"]) - time.time() * 1000) < 60_000
    # Only what was asked for: no attribute names, no Attributes key.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    again = sqs.receive_message(QueueUrl=url)["Messages"][0]
    assert "Attributes" not in again and "MessageAttributes" not in again


def test_message_attribute_md5_matches_sqs_reference():
    # The algorithm of SQS's MD5OfMessageAttributes (sorted names; length-prefixed name, type,
    # a transport byte, length-prefixed value), computed here byte by byte for one attribute.
    attrs = {"a": {"DataType": "String", "StringValue": "x"}}
    raw = b"\x00\x00\x00\x01a" + b"\x00\x00\x00\x06String" + b"\x01" + b"\x00\x00\x00\x01x"
    assert shmfifo.md5_of_message_attributes(attrs) == hashlib.md5(raw).hexdigest()


def test_an_empty_receive_has_no_messages_key(sqs, url):
    # R5: nothing after the wait; boto3's answer then has no "Messages".
    r = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    assert "Messages" not in r


def test_errors_carry_sqs_codes(sqs, url):
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as e:
        sqs.get_queue_url(QueueName="missing.fifo")
    assert code(e) == "AWS.SimpleQueueService.NonExistentQueue"
    # S1: a FIFO send needs a group id.
    with pytest.raises(sqs.exceptions.ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="1")
    assert code(e) == "MissingParameter"
    # S4: no dedup id and no content-based deduplication.
    with pytest.raises(sqs.exceptions.ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    assert code(e) == "InvalidParameterValue"
    # S5: per-message delay on FIFO.
    with pytest.raises(sqs.exceptions.ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="2", DelaySeconds=5)
    assert code(e) == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ClientError) as e:
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11)
    assert code(e) == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle="garbage")
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Colour": "blue"})
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "abc"})
    # S11: an empty batch.
    with pytest.raises(sqs.exceptions.EmptyBatchRequest):
        sqs.send_message_batch(QueueUrl=url, Entries=[])
    e = sqs.exceptions.ClientError({"Error": {"Code": "X", "Message": "m"}}, "Op")
    assert "An error occurred (X) when calling the Op operation: m" in str(e)


def test_maximum_message_size_is_1_mib_as_sqs_has_it(sqs):
    # Q4, S6: a queue created without MaximumMessageSize takes SQS's default, 1 MiB (layout 15:
    # the class for messages over 256 KiB starts empty and grows on demand); lowered and raised
    # again live; CreateQueue again naming SQS's default is the same queue (Q7).
    url = sqs.create_queue(QueueName="big.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"]
    assert attrs["MaximumMessageSize"] == "1048576"
    again = sqs.create_queue(QueueName="big.fifo", Attributes={"FifoQueue": "true", "MaximumMessageSize": "1048576"})
    assert again["QueueUrl"] == url
    body = "x" * (1 << 20)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "262144"})
    with pytest.raises(sqs.exceptions.ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g", MessageDeduplicationId="1")
    assert code(e) == "InvalidParameterValue"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "1048576"})
    sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g", MessageDeduplicationId="1")
    [m] = sqs.receive_message(QueueUrl=url)["Messages"]
    assert m["Body"] == body
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_batch_entries_fail_alone(sqs):
    url = sqs.create_queue(QueueName="small.fifo", Attributes={"FifoQueue": "true", "MaximumMessageSize": "1024"})["QueueUrl"]
    # S13: an entry over MaximumMessageSize fails alone (HTTP 200), the others are sent.
    r = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "1"},
            {"Id": "big", "MessageBody": "b" * 2000, "MessageGroupId": "g", "MessageDeduplicationId": "2"},
        ],
    )
    assert [e["Id"] for e in r["Successful"]] == ["ok"]
    [f] = r["Failed"]
    assert (f["Id"], f["SenderFault"], f["Code"]) == ("big", True, "InvalidParameterValue")
    # S12: an entry without a group id fails the whole request, with InvalidParameterValue
    # (not the single send's MissingParameter).
    with pytest.raises(sqs.exceptions.ClientError) as e:
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "x", "MessageBody": "b", "MessageDeduplicationId": "3"}])
    assert code(e) == "InvalidParameterValue"
    m = sqs.receive_message(QueueUrl=url)["Messages"][0]
    r = sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "x", "ReceiptHandle": m["ReceiptHandle"]}, {"Id": "y", "ReceiptHandle": "junk"}])
    assert r["Successful"] == [{"Id": "x"}]
    assert r["Failed"][0]["Id"] == "y" and r["Failed"][0]["Code"] == "ReceiptHandleIsInvalid"


def test_create_queue_rules(sqs):
    # Q1: FIFO names end in .fifo and need FifoQueue=true.
    for name, attrs in [("plain", {"FifoQueue": "true"}), ("x.fifo", {}), ("bad name.fifo", {"FifoQueue": "true"})]:
        with pytest.raises(sqs.exceptions.ClientError) as e:
            sqs.create_queue(QueueName=name, Attributes=attrs)
        assert code(e) == "InvalidParameterValue"
    a = {"FifoQueue": "true", "VisibilityTimeout": "45", "ContentBasedDeduplication": "true"}
    url = sqs.create_queue(QueueName="c.fifo", Attributes=a)["QueueUrl"]
    # Q7: the same attributes again: the same URL; different ones: QueueAlreadyExists.
    assert sqs.create_queue(QueueName="c.fifo", Attributes=a)["QueueUrl"] == url
    with pytest.raises(sqs.exceptions.QueueNameExists) as e:
        sqs.create_queue(QueueName="c.fifo", Attributes=dict(a, VisibilityTimeout="46"))
    assert code(e) == "QueueAlreadyExists" and "VisibilityTimeout" in e.value.response["Error"]["Message"]
    # Q3: perMessageGroupId throughput needs messageGroup scope.
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.create_queue(QueueName="t.fifo", Attributes={"FifoQueue": "true", "FifoThroughputLimit": "perMessageGroupId"})
    sqs.create_queue(
        QueueName="t.fifo",
        Attributes={"FifoQueue": "true", "FifoThroughputLimit": "perMessageGroupId", "DeduplicationScope": "messageGroup"},
    )
    # D5: content-based dedup: a send without an id deduplicates on the body.
    first = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    second = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    assert first["MessageId"] == second["MessageId"]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"] == {"ApproximateNumberOfMessages": "1"}
    urls = sqs.list_queues()["QueueUrls"]
    assert url in urls and len(urls) == 2
    assert sqs.list_queues(QueueNamePrefix="zzz").get("QueueUrls") is None


def test_dead_letter_queue_by_arn(sqs):
    # X1: a RedrivePolicy copied from AWS (an ARN) names the local queue; receives beyond
    # maxReceiveCount move the message there.
    dlq = sqs.create_queue(QueueName="dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": "arn:aws:sqs:eu-west-1:123456789012:dlq.fifo", "maxReceiveCount": "1"})
    src = sqs.create_queue(QueueName="src.fifo", Attributes={"FifoQueue": "true", "RedrivePolicy": policy})["QueueUrl"]
    got = json.loads(sqs.get_queue_attributes(QueueUrl=src, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"])
    assert got == {"deadLetterTargetArn": arn, "maxReceiveCount": 1}
    sqs.send_message(QueueUrl=src, MessageBody="poison", MessageGroupId="g", MessageDeduplicationId="p")
    m = sqs.receive_message(QueueUrl=src, VisibilityTimeout=0)["Messages"][0]
    assert m["Body"] == "poison"
    assert "Messages" not in sqs.receive_message(QueueUrl=src)
    moved = sqs.receive_message(QueueUrl=dlq, AttributeNames=["All"])["Messages"][0]
    assert moved["Body"] == "poison"
    assert moved["Attributes"]["DeadLetterQueueSourceArn"] == shmfifo.LOCAL_ARN_PREFIX + "src.fifo"


def test_errors_and_system_attributes_answer_as_serve_does(sqs, url):
    # A missing dead-letter queue: the client said shmfifo.DeadLetterQueue, Receiver, 500
    # (which retry logic retries); serve said InvalidParameterValue, Sender, 400. Both say
    # serve's now.
    policy = json.dumps({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:none.fifo", "maxReceiveCount": 3})
    with pytest.raises(Exception) as e:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
    err = e.value.response
    assert (err["Error"]["Code"], err["Error"].get("Type"), err["ResponseMetadata"]["HTTPStatusCode"]) == ("InvalidParameterValue", "Sender", 400), err
    # H4: a malformed receipt handle is SQS's 404 (it was 400).
    with pytest.raises(Exception) as e:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="garbage")
    err = e.value.response
    assert (err["Error"]["Code"], err["Error"].get("Type"), err["ResponseMetadata"]["HTTPStatusCode"]) == ("ReceiptHandleIsInvalid", "Sender", 404), err
    # SQS's words where they are recorded (H4, H2, S1, S12), not the library's own text.
    assert err["Error"]["Message"] == 'The input receipt handle "garbage" is not a valid receipt handle.'
    sqs.send_message(QueueUrl=url, MessageBody="old", MessageGroupId="h", MessageDeduplicationId="h1")
    [m] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]
    sqs.receive_message(QueueUrl=url)
    with pytest.raises(Exception) as e:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    msg = e.value.response["Error"]["Message"]
    assert msg == f"Value {m['ReceiptHandle']} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.", msg
    with pytest.raises(Exception) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="n1")
    assert e.value.response["Error"]["Message"] == "The request must contain the parameter MessageGroupId."
    with pytest.raises(Exception) as e:
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "bad id", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "b1"}])
    assert e.value.response["Error"]["Message"] == "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long."
    # SQS's encryption attributes are refused saying why, not as a misspelling.
    with pytest.raises(Exception) as e:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "alias/aws/sqs"})
    assert code(e) == "InvalidAttributeName" and "encryption" in e.value.response["Error"]["Message"]
    # X-Ray's AWSTraceHeader is taken (and not kept), alone and in a batch.
    trace = {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793"}}
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="1", MessageSystemAttributes=trace)
    r = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "y", "MessageGroupId": "g", "MessageDeduplicationId": "2", "MessageSystemAttributes": trace}])
    assert [s["Id"] for s in r["Successful"]] == ["a"]
    # A key boto3's model does not know is refused before sending, as boto3 refuses it.
    from botocore.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "b", "MessageBody": "z", "MessageGroupId": "g", "MessageDeduplicationId": "3", "Foo": 1}])


def test_message_attributes_are_checked_as_boto3_checks_them_before_a_send(sqs, url):
    # A value boto3's model refuses is refused before anything is sent (the client sent the
    # message and then raised AttributeError computing the answer's checksum).
    from botocore.exceptions import ParamValidationError

    for attrs in (
        {"n": {"DataType": "Number", "StringValue": 12}},
        {"b": "plain"},
        {"b": {"DataType": "Binary", "BinaryValue": 5}},
    ):
        with pytest.raises(ParamValidationError):
            sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="1", MessageAttributes=attrs)
        with pytest.raises(ParamValidationError):
            sqs.send_message_batch(QueueUrl=url, Entries=[dict(Id="1", MessageBody="x", MessageGroupId="g", MessageDeduplicationId="2", MessageAttributes=attrs)])
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "0"
    # A value in the other field than its type's (the checksum's transport byte follows the
    # type): refused, as SQS refuses it.
    for attrs in ({"b": {"DataType": "Binary", "StringValue": "x"}}, {"s": {"DataType": "String", "BinaryValue": b"x"}}):
        with pytest.raises(sqs.exceptions.ClientError) as e:
            sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="m", MessageAttributes=attrs)
        assert code(e) == "InvalidParameterValue" and "must use field" in str(e.value)
    # A BinaryValue given as a str is sent as its UTF-8 bytes, as boto3 sends it; the
    # answer's checksum is the one of what was sent.
    given = {"b": {"DataType": "Binary", "BinaryValue": "abc"}, "s": {"DataType": "String", "StringValue": "v"}}
    sent = {"b": {"DataType": "Binary", "BinaryValue": b"abc"}, "s": {"DataType": "String", "StringValue": "v"}}
    r = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="3", MessageAttributes=given)
    assert r["MD5OfMessageAttributes"] == shmfifo.md5_of_message_attributes(sent)
    r = sqs.send_message_batch(QueueUrl=url, Entries=[dict(Id="e", MessageBody="y", MessageGroupId="g", MessageDeduplicationId="4", MessageAttributes=given)])
    assert r["Successful"][0]["MD5OfMessageAttributes"] == shmfifo.md5_of_message_attributes(sent)
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert [m["MessageAttributes"]["b"]["BinaryValue"] for m in got] == [b"abc", b"abc"]


def test_visibility_and_attempt_ids(sqs, url):
    sqs.send_message(QueueUrl=url, MessageBody="job", MessageGroupId="g", MessageDeduplicationId="1")
    # R11: the same attempt id returns the same batch.
    a = sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="try-1")["Messages"]
    b = sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId="try-1")["Messages"]
    assert [m["ReceiptHandle"] for m in a] == [m["ReceiptHandle"] for m in b]
    # R4 via ChangeMessageVisibilityBatch: 0 makes it visible at once.
    r = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[{"Id": "1", "ReceiptHandle": a[0]["ReceiptHandle"], "VisibilityTimeout": 0}])
    assert r["Successful"] == [{"Id": "1"}]
    m = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
    assert m["Attributes"]["ApproximateReceiveCount"] == "2"
    sqs.purge_queue(QueueUrl=url)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_client_error_is_botocores_when_installed():
    try:
        from botocore.exceptions import ClientError as Boto
    except ImportError:
        assert shmfifo.ClientError.__mro__[1].__name__ == "_ClientErrorBase"
    else:
        assert issubclass(shmfifo.ClientError, Boto)


# -- A new user's first hour: what a mistake does, before anything is done ------------------


def test_list_queues_pages_with_next_token(sqs):
    for n in ("a", "b", "c", "d", "e"):
        sqs.create_queue(QueueName=f"{n}.fifo", Attributes={"FifoQueue": "true"})
    seen, token, pages = [], None, 0
    while True:
        kw = {"MaxResults": 2}
        if token:
            kw["NextToken"] = token
        r = sqs.list_queues(**kw)
        seen += [u.rsplit("/", 1)[-1] for u in r.get("QueueUrls", [])]
        pages += 1
        token = r.get("NextToken")
        if not token:
            break
    assert seen == ["a.fifo", "b.fifo", "c.fifo", "d.fifo", "e.fifo"] and pages == 3
    assert "NextToken" not in sqs.list_queues()
    for bad in (0, 1001):
        with pytest.raises(sqs.exceptions.ClientError) as e:
            sqs.list_queues(MaxResults=bad)
        assert code(e) == "InvalidParameterValue"


def test_set_queue_attributes_is_all_or_nothing(sqs, url):
    # Q5 (our choice for a request of several): one bad value, and the good one beside it is not applied either.
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "7", "VisibilityTimeout": "-5"})
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "7", "Colour": "blue"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])["Attributes"]
    assert got["DelaySeconds"] == "0"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "7", "VisibilityTimeout": "45"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (got["DelaySeconds"], got["VisibilityTimeout"]) == ("7", "45")
    # Q6: the last change's time, in seconds as CreatedTimestamp (it was not answered).
    assert int(got["CreatedTimestamp"]) <= int(got["LastModifiedTimestamp"]) <= time.time() + 1
    only = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["LastModifiedTimestamp"])["Attributes"]
    assert only == {"LastModifiedTimestamp": got["LastModifiedTimestamp"]}


@pytest.fixture
def local(qdir):
    c = shmfifo.client("sqs", directory=qdir)
    yield c
    c.close()


def test_a_wrong_argument_is_refused_before_anything_is_sent(local):
    sqs = local
    url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    bad_sends = [
        dict(MessageBody=b"bytes", MessageGroupId="g"),
        dict(MessageBody=42, MessageGroupId="g"),
        dict(MessageBody="x", MessageGroupId=7),
        dict(MessageBody="x", MessageGroupId="g", DelaySeconds=-1),
        dict(MessageBody="x", MessageGroupId="g", DelaySeconds="0"),
    ]
    for kw in bad_sends:
        with pytest.raises(sqs.exceptions.ClientError) as e:
            sqs.send_message(QueueUrl=url, **kw)
        assert code(e) == "InvalidParameterValue", kw
        with pytest.raises(sqs.exceptions.ClientError) as e:
            sqs.send_message_batch(QueueUrl=url, Entries=[dict(Id="1", MessageBody="fine", MessageGroupId="g"), dict(Id="2", **kw)])
        assert code(e) == "InvalidParameterValue", kw
    # Nothing was sent: not the bad messages, not a batch's good entry beside them.
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "0"
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    h = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
    for v in (-1, "abc", None, True):
        with pytest.raises(sqs.exceptions.ClientError) as e:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=h, VisibilityTimeout=v)
        assert code(e) == "InvalidParameterValue", v
    # Attribute values are strings; a whole number is taken as its digits, a bool is not.
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.create_queue(QueueName="r.fifo", Attributes={"FifoQueue": True})
    sqs.create_queue(QueueName="r.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": 60})
    # Every exception boto3 models is there to catch, and from_code finds them.
    for name in ("PurgeQueueInProgress", "QueueDeletedRecently", "OverLimit", "MessageNotInflight", "InvalidIdFormat", "UnsupportedOperation", "InvalidAddress", "KmsThrottled"):
        assert issubclass(getattr(sqs.exceptions, name), sqs.exceptions.ClientError)
    assert sqs.exceptions.from_code("AWS.SimpleQueueService.NonExistentQueue") is sqs.exceptions.QueueDoesNotExist
    assert sqs.exceptions.from_code("NoSuchCode") is sqs.exceptions.ClientError


def test_arguments_of_the_wrong_type_are_refused_by_name(local):
    # Each was a TypeError or AttributeError of Python's, or (a string where a list of names
    # goes) read one character at a time.
    sqs = local
    url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    calls = [
        lambda: sqs.get_queue_url(QueueName=None),
        lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle=None),
        lambda: sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=None, VisibilityTimeout=0),
        lambda: sqs.receive_message(QueueUrl=url, ReceiveRequestAttemptId=5),
        lambda: sqs.receive_message(QueueUrl=url, AttributeNames="All"),
        lambda: sqs.receive_message(QueueUrl=url, MessageAttributeNames="All"),
        lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames="All"),
    ]
    for call in calls:
        with pytest.raises(sqs.exceptions.ClientError) as e:
            call()
        assert code(e) == "InvalidParameterValue"
    # A queue URL of SQS's form names the queue of the client's directory by its last part,
    # as an ARN does by its last field (it was taken as a relative path).
    aws = "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo"
    sqs.send_message(QueueUrl=aws, MessageBody="by an AWS URL", MessageGroupId="g")
    got = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in got] == ["by an AWS URL"]
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_attributes(QueueUrl="http://127.0.0.1:9324/000000000000/other.fifo")
    # Handed to a spawned child: refused, saying what to do.
    import pickle

    with pytest.raises(TypeError, match="make one in the other process"):
        pickle.dumps(sqs)


def test_a_binary_queue_is_refused_before_a_receive_takes_anything(local, qdir):
    q = shmfifo.Queue.create(f"{qdir}/raw.fifo", body_mode="binary", deduplication="off")
    q.send("g", b"\xff\x00")
    url = local.get_queue_url(QueueName="raw.fifo")["QueueUrl"]
    with pytest.raises(local.exceptions.UnsupportedOperation):
        local.receive_message(QueueUrl=url)
    # Still visible, never received: a Queue takes it whole.
    got = q.receive(wait=0)
    assert [m.body for m in got] == [b"\xff\x00"] and got[0].receive_count == 1
    q.close()


def test_a_url_names_the_queue_there_now(local, qdir):
    # A queue deleted by another process is gone for this client too, and one made
    # again in its place is the one this client's URL reaches (its old handle is let go).
    a, b = local, shmfifo.client("sqs", directory=qdir)
    url = a.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    a.send_message(QueueUrl=url, MessageBody="1", MessageGroupId="g")
    b.delete_queue(QueueUrl=url)
    with pytest.raises(a.exceptions.QueueDoesNotExist):
        a.send_message(QueueUrl=url, MessageBody="lost?", MessageGroupId="g")
    b.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})
    a.send_message(QueueUrl=url, MessageBody="2", MessageGroupId="g")
    got = b.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in got] == ["2"]
    b.close()


def test_a_missing_directory_is_named(qdir):
    c = shmfifo.client("sqs", directory=f"{qdir}/nodir")
    with pytest.raises(c.exceptions.QueueDoesNotExist) as e:
        c.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})
    assert "no directory" in e.value.response["Error"]["Message"]
    with pytest.raises(c.exceptions.QueueDoesNotExist):
        c.list_queues()
