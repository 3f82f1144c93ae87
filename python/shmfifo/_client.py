"""A boto3-shaped SQS client over local shmfifo queues.

``shmfifo.client("sqs")`` takes the same calls as ``boto3.client("sqs")`` for FIFO queues and
answers with the same dicts and the same error codes, so code written for SQS FIFO runs on a
local queue unchanged. Queue URLs are ``shm:`` followed by the queue file's path
(``shm:/dev/shm/orders.fifo``); ARNs are ``arn:aws:sqs:local:000000000000:NAME``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import uuid
from typing import Any, Dict, Iterable, List, Optional

from ._errors import Error
from ._shmfifo import LOCAL_ARN_PREFIX, RawQueue

try:  # Programs that catch botocore's ClientError catch ours too.
    from botocore.exceptions import ClientError as _ClientErrorBase  # type: ignore
except ImportError:  # pragma: no cover - depends on the environment

    class _ClientErrorBase(Exception):  # type: ignore[no-redef]
        def __init__(self, error_response: dict, operation_name: str) -> None:
            err = error_response.get("Error", {})
            super().__init__(
                f"An error occurred ({err.get('Code', 'Unknown')}) when calling the "
                f"{operation_name} operation: {err.get('Message', '')}"
            )
            self.response = error_response
            self.operation_name = operation_name


class ClientError(_ClientErrorBase):
    """An SQS error: ``e.response["Error"]["Code"]`` is SQS's code, as boto3 raises it.

    A subclass of ``botocore.exceptions.ClientError`` when botocore is installed."""


_EXCEPTIONS = {
    # boto3's modelled exception name -> the codes that raise it.
    "QueueDoesNotExist": ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"),
    "QueueNameExists": ("QueueAlreadyExists", "QueueNameExists"),
    "ReceiptHandleIsInvalid": ("ReceiptHandleIsInvalid",),
    "InvalidMessageContents": ("InvalidMessageContents",),
    "EmptyBatchRequest": ("AWS.SimpleQueueService.EmptyBatchRequest",),
    "TooManyEntriesInBatchRequest": ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest",),
    "BatchEntryIdsNotDistinct": ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct",),
    "InvalidBatchEntryId": ("AWS.SimpleQueueService.InvalidBatchEntryId",),
    "BatchRequestTooLong": ("AWS.SimpleQueueService.BatchRequestTooLong",),
    "InvalidAttributeName": ("InvalidAttributeName",),
    "InvalidAttributeValue": ("InvalidAttributeValue",),
}


class _Exceptions:
    """``client.exceptions``: one ``ClientError`` subclass per modelled SQS error."""

    ClientError = ClientError

    def __init__(self) -> None:
        self._by_code: Dict[str, type] = {}
        for name, codes in _EXCEPTIONS.items():
            cls = type(name, (ClientError,), {})
            setattr(self, name, cls)
            for c in codes:
                self._by_code[c] = cls

    def of(self, code: str) -> type:
        return self._by_code.get(code, ClientError)


_NAME = re.compile(r"^[A-Za-z0-9_-]{1,75}\.fifo$")
# Every name GetQueueAttributes knows; those shmfifo has no value for (Policy, KMS settings,
# LastModifiedTimestamp, RedriveAllowPolicy, SqsManagedSseEnabled) are simply not returned.
_QUEUE_ATTRIBUTES = frozenset(
    "All Policy VisibilityTimeout MaximumMessageSize MessageRetentionPeriod "
    "ApproximateNumberOfMessages ApproximateNumberOfMessagesNotVisible CreatedTimestamp "
    "LastModifiedTimestamp QueueArn ApproximateNumberOfMessagesDelayed DelaySeconds "
    "ReceiveMessageWaitTimeSeconds RedrivePolicy FifoQueue ContentBasedDeduplication "
    "KmsMasterKeyId KmsDataKeyReusePeriodSeconds DeduplicationScope FifoThroughputLimit "
    "RedriveAllowPolicy SqsManagedSseEnabled".split()
)


def _meta() -> dict:
    return {
        "RequestId": str(uuid.uuid4()),
        "HTTPStatusCode": 200,
        "HTTPHeaders": {},
        "RetryAttempts": 0,
    }


def _md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def md5_of_message_attributes(attributes: Dict[str, Dict[str, Any]]) -> str:
    """SQS's ``MD5OfMessageAttributes``: over the attributes sorted by name, each as its
    length-prefixed name and data type, a transport byte (1 text, 2 binary) and the
    length-prefixed value."""
    out = bytearray()
    for name in sorted(attributes):
        a = attributes[name]
        for part in (name.encode(), a["DataType"].encode()):
            out += struct.pack(">I", len(part)) + part
        if "BinaryValue" in a:
            v = bytes(a["BinaryValue"])
            out += b"\x02"
        else:
            v = a["StringValue"].encode()
            out += b"\x01"
        out += struct.pack(">I", len(v)) + v
    return _md5(bytes(out))


def _want(names: Optional[Iterable[str]], name: str) -> bool:
    if not names:
        return False
    for n in names:
        if n in ("All", ".*") or n == name or (n.endswith(".*") and name.startswith(n[:-1])):
            return True
    return False


class Client:
    """The boto3-shaped client (see the module doc); make one with :func:`client`."""

    def __init__(self, directory: str = "/dev/shm") -> None:
        self._dir = os.path.abspath(directory)
        self._open: Dict[str, RawQueue] = {}
        self.exceptions = _Exceptions()

    # -- plumbing ---------------------------------------------------------------------------

    def _raise(self, op: str, code: str, message: str, sender: bool = True) -> None:
        status = 400 if sender else 500
        resp = {
            "Error": {"Code": code, "Message": message, "Type": "Sender" if sender else "Receiver"},
            "ResponseMetadata": dict(_meta(), HTTPStatusCode=status),
        }
        raise self.exceptions.of(code)(resp, op)

    def _path(self, op: str, url: str) -> str:
        if not isinstance(url, str) or not url:
            self._raise(op, "InvalidAddress", "The address is not valid for this endpoint.")
        p = url[4:] if url.startswith("shm:") else url
        if "/" not in p:
            p = os.path.join(self._dir, p)
        return p

    def _url(self, path: str) -> str:
        return "shm:" + path

    def _arn(self, path: str) -> str:
        return LOCAL_ARN_PREFIX + os.path.basename(path)

    def _queue(self, op: str, url: str) -> RawQueue:
        path = self._path(op, url)
        q = self._open.get(path)
        if q is None:
            q = self._call(op, RawQueue.open, path)
            self._open[path] = q
        return q

    def _call(self, op: str, fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except Error as e:
            self._raise(op, e.code, e.message, not (e.code.startswith("shmfifo.") or e.code == "ServiceUnavailable"))

    def _local_policy(self, value: str) -> str:
        """A RedrivePolicy with its target ARN (or name) turned into a path in our directory."""
        try:
            p = json.loads(value)
        except ValueError:
            return value  # the library reports the error
        t = p.get("deadLetterTargetArn") if isinstance(p, dict) else None
        if isinstance(t, str) and "/" not in t:
            name = t.rsplit(":", 1)[-1] if t.startswith("arn:") else t
            p["deadLetterTargetArn"] = os.path.join(self._dir, name)
        return json.dumps(p)

    def _policy_key(self, value: str):
        p = json.loads(self._sqs_policy(value))
        return (p.get("deadLetterTargetArn"), int(p.get("maxReceiveCount", 0)))

    def _sqs_policy(self, value: str) -> str:
        p = json.loads(value)
        t = p["deadLetterTargetArn"]
        if t.startswith("/"):
            p["deadLetterTargetArn"] = self._arn(t)
        return json.dumps(p, separators=(",", ":"))

    def _attributes_in(self, op: str, attrs: Optional[Dict[str, Dict[str, Any]]]):
        if not attrs:
            return None
        out = []
        for name, a in attrs.items():
            t = a.get("DataType")
            if not t:
                self._raise(op, "InvalidParameterValue", f"The message attribute '{name}' must contain a non-empty message attribute type.")
            if "BinaryValue" in a:
                v = a["BinaryValue"]
                v = v.encode() if isinstance(v, str) else bytes(v)
            elif "StringValue" in a:
                v = str(a["StringValue"]).encode()
            else:
                self._raise(op, "InvalidParameterValue", f"The message attribute '{name}' must contain a non-empty message attribute value.")
            out.append((name, t, v))
        return out

    # -- queues -----------------------------------------------------------------------------

    def create_queue(self, *, QueueName: str, Attributes: Optional[Dict[str, str]] = None, tags: Optional[Dict[str, str]] = None) -> dict:
        op = "CreateQueue"
        attrs = dict(Attributes or {})
        fifo = attrs.get("FifoQueue")
        if not _NAME.match(QueueName or "") or fifo != "true":
            self._raise(
                op,
                "InvalidParameterValue",
                "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
                "underscores, must end with .fifo suffix and be 1 to 80 in length; FifoQueue must "
                "be true (shmfifo serves FIFO queues only).",
            )
        if "RedrivePolicy" in attrs:
            attrs["RedrivePolicy"] = self._local_policy(attrs["RedrivePolicy"])
        path = os.path.join(self._dir, QueueName)
        try:
            self._open[path] = RawQueue.create(path, list(attrs.items()))
        except Error as e:
            if e.code != "QueueAlreadyExists":
                self._raise(op, e.code, e.message)
            # Q7: the same attributes again is success; others are QueueAlreadyExists.
            have = dict(self._queue(op, path).attributes())
            differ = []
            for k, v in attrs.items():
                if k == "RedrivePolicy":
                    same = k in have and self._policy_key(v) == self._policy_key(have[k])
                else:
                    same = have.get(k) == str(v)
                if not same:
                    differ.append(k)
            if differ:
                self._raise(op, "QueueAlreadyExists", f"A queue already exists with the same name and a different value for attribute(s) {', '.join(differ)}")
        return {"QueueUrl": self._url(path), "ResponseMetadata": _meta()}

    def get_queue_url(self, *, QueueName: str, QueueOwnerAWSAccountId: Optional[str] = None) -> dict:
        path = os.path.join(self._dir, QueueName)
        self._queue("GetQueueUrl", path)
        return {"QueueUrl": self._url(path), "ResponseMetadata": _meta()}

    def list_queues(self, *, QueueNamePrefix: str = "", MaxResults: Optional[int] = None, NextToken: Optional[str] = None) -> dict:
        names = sorted(
            n for n in os.listdir(self._dir)
            if n.endswith(".fifo") and n.startswith(QueueNamePrefix) and os.path.isfile(os.path.join(self._dir, n))
        )
        if MaxResults is not None:
            names = names[:MaxResults]
        out: dict = {"ResponseMetadata": _meta()}
        if names:
            out["QueueUrls"] = [self._url(os.path.join(self._dir, n)) for n in names]
        return out

    def delete_queue(self, *, QueueUrl: str) -> dict:
        op = "DeleteQueue"
        path = self._path(op, QueueUrl)
        q = self._open.pop(path, None)
        if q is not None:
            q.close()
        self._call(op, RawQueue.unlink, path)
        return {"ResponseMetadata": _meta()}

    def purge_queue(self, *, QueueUrl: str) -> dict:
        op = "PurgeQueue"
        self._call(op, self._queue(op, QueueUrl).purge)
        return {"ResponseMetadata": _meta()}

    def get_queue_attributes(self, *, QueueUrl: str, AttributeNames: Optional[List[str]] = None) -> dict:
        op = "GetQueueAttributes"
        q = self._queue(op, QueueUrl)
        have = dict(self._call(op, q.attributes))
        have["QueueArn"] = self._arn(self._path(op, QueueUrl))
        if "RedrivePolicy" in have:
            have["RedrivePolicy"] = self._sqs_policy(have["RedrivePolicy"])
        out: dict = {"ResponseMetadata": _meta()}
        names = AttributeNames or []
        for n in names:
            if n not in _QUEUE_ATTRIBUTES:
                self._raise(op, "InvalidAttributeName", f"Unknown Attribute {n}.")
        if names:
            out["Attributes"] = {k: v for k, v in have.items() if "All" in names or k in names}
        return out

    def set_queue_attributes(self, *, QueueUrl: str, Attributes: Dict[str, str]) -> dict:
        op = "SetQueueAttributes"
        q = self._queue(op, QueueUrl)
        for k, v in Attributes.items():
            if k == "RedrivePolicy" and v:
                v = self._local_policy(v)
            self._call(op, q.set_attribute, k, str(v))
        return {"ResponseMetadata": _meta()}

    # -- messages ---------------------------------------------------------------------------

    def send_message(
        self,
        *,
        QueueUrl: str,
        MessageBody: str,
        MessageGroupId: Optional[str] = None,
        MessageDeduplicationId: Optional[str] = None,
        MessageAttributes: Optional[Dict[str, Dict[str, Any]]] = None,
        DelaySeconds: Optional[int] = None,
    ) -> dict:
        op = "SendMessage"
        q = self._queue(op, QueueUrl)
        attrs = self._attributes_in(op, MessageAttributes)
        mid, seq, _dup = self._call(op, q.send, MessageGroupId, MessageBody, MessageDeduplicationId, attrs, DelaySeconds)
        out = {"MD5OfMessageBody": _md5(MessageBody.encode()), "MessageId": mid, "SequenceNumber": seq, "ResponseMetadata": _meta()}
        if MessageAttributes:
            out["MD5OfMessageAttributes"] = md5_of_message_attributes(MessageAttributes)
        return out

    def send_message_batch(self, *, QueueUrl: str, Entries: List[Dict[str, Any]]) -> dict:
        op = "SendMessageBatch"
        q = self._queue(op, QueueUrl)
        entries = [
            (
                e.get("Id", ""),
                e.get("MessageGroupId"),
                e.get("MessageBody", ""),
                e.get("MessageDeduplicationId"),
                self._attributes_in(op, e.get("MessageAttributes")),
                e.get("DelaySeconds"),
            )
            for e in Entries
        ]
        by_id = {e.get("Id"): e for e in Entries}
        ok, failed = [], []
        for eid, success, payload in self._call(op, q.send_batch, entries):
            if success:
                mid, seq, _dup = payload
                r = {"Id": eid, "MessageId": mid, "MD5OfMessageBody": _md5(by_id[eid]["MessageBody"].encode()), "SequenceNumber": seq}
                if by_id[eid].get("MessageAttributes"):
                    r["MD5OfMessageAttributes"] = md5_of_message_attributes(by_id[eid]["MessageAttributes"])
                ok.append(r)
            else:
                code, msg, sender = payload
                failed.append({"Id": eid, "SenderFault": sender, "Code": code, "Message": msg})
        return {"Successful": ok, "Failed": failed, "ResponseMetadata": _meta()}

    def receive_message(
        self,
        *,
        QueueUrl: str,
        AttributeNames: Optional[List[str]] = None,
        MessageSystemAttributeNames: Optional[List[str]] = None,
        MessageAttributeNames: Optional[List[str]] = None,
        MaxNumberOfMessages: int = 1,
        VisibilityTimeout: Optional[int] = None,
        WaitTimeSeconds: Optional[int] = None,
        ReceiveRequestAttemptId: Optional[str] = None,
    ) -> dict:
        op = "ReceiveMessage"
        q = self._queue(op, QueueUrl)
        for name, v in (("MaxNumberOfMessages", MaxNumberOfMessages), ("VisibilityTimeout", VisibilityTimeout), ("WaitTimeSeconds", WaitTimeSeconds)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                self._raise(op, "InvalidParameterValue", f"Value {v} for parameter {name} is invalid.")
        vt = None if VisibilityTimeout is None else VisibilityTimeout * 1000
        wait = None if WaitTimeSeconds is None else WaitTimeSeconds * 1000
        got = self._call(op, q.receive, MaxNumberOfMessages, vt, wait, ReceiveRequestAttemptId)
        system = list(AttributeNames or []) + list(MessageSystemAttributeNames or [])
        out: dict = {"ResponseMetadata": _meta()}
        msgs = []
        for m in got:
            r: Dict[str, Any] = {
                "MessageId": m["message_id"],
                "ReceiptHandle": m["receipt_handle"],
                "MD5OfBody": _md5(m["body"].encode()),
                "Body": m["body"],
            }
            a = {
                "SentTimestamp": str(m["sent_timestamp"]),
                "ApproximateReceiveCount": str(m["receive_count"]),
                "ApproximateFirstReceiveTimestamp": str(m["first_receive_timestamp"]),
                "SequenceNumber": m["sequence_number"],
                "MessageGroupId": m["group_id"],
            }
            if m["dedup_id"] is not None:
                a["MessageDeduplicationId"] = m["dedup_id"]
            if m["dead_letter_source"]:
                a["DeadLetterQueueSourceArn"] = self._arn(m["dead_letter_source"])
            a = {k: v for k, v in a.items() if _want(system, k)}
            if a:
                r["Attributes"] = a
            ma = {}
            for name, t, v in m["attributes"]:
                if _want(MessageAttributeNames, name):
                    ma[name] = {"BinaryValue": v, "DataType": t} if isinstance(v, bytes) else {"StringValue": v, "DataType": t}
            if ma:
                r["MessageAttributes"] = ma
                r["MD5OfMessageAttributes"] = md5_of_message_attributes(ma)
            msgs.append(r)
        if msgs:
            out["Messages"] = msgs
        return out

    def delete_message(self, *, QueueUrl: str, ReceiptHandle: str) -> dict:
        op = "DeleteMessage"
        self._call(op, self._queue(op, QueueUrl).delete, ReceiptHandle)
        return {"ResponseMetadata": _meta()}

    def delete_message_batch(self, *, QueueUrl: str, Entries: List[Dict[str, str]]) -> dict:
        op = "DeleteMessageBatch"
        q = self._queue(op, QueueUrl)
        res = self._call(op, q.delete_batch, [(e.get("Id", ""), e.get("ReceiptHandle", "")) for e in Entries])
        return self._batch_out(res)

    def change_message_visibility(self, *, QueueUrl: str, ReceiptHandle: str, VisibilityTimeout: int) -> dict:
        op = "ChangeMessageVisibility"
        self._call(op, self._queue(op, QueueUrl).change_visibility, ReceiptHandle, int(VisibilityTimeout) * 1000)
        return {"ResponseMetadata": _meta()}

    def change_message_visibility_batch(self, *, QueueUrl: str, Entries: List[Dict[str, Any]]) -> dict:
        op = "ChangeMessageVisibilityBatch"
        q = self._queue(op, QueueUrl)
        res = self._call(
            op,
            q.change_visibility_batch,
            [(e.get("Id", ""), e.get("ReceiptHandle", ""), int(e.get("VisibilityTimeout", 0)) * 1000) for e in Entries],
        )
        return self._batch_out(res)

    @staticmethod
    def _batch_out(res) -> dict:
        ok, failed = [], []
        for eid, fail in res:
            if fail is None:
                ok.append({"Id": eid})
            else:
                code, msg, sender = fail
                failed.append({"Id": eid, "SenderFault": sender, "Code": code, "Message": msg})
        return {"Successful": ok, "Failed": failed, "ResponseMetadata": _meta()}

    def close(self) -> None:
        """Releases every queue handle this client opened."""
        for q in self._open.values():
            q.close()
        self._open.clear()


def client(service_name: str = "sqs", *, directory: str = "/dev/shm", **_aws: Any) -> Client:
    """``boto3.client("sqs", …)`` for local queues: the queues are files in ``directory``.
    AWS settings (``region_name``, ``endpoint_url``, credentials) are accepted and unused."""
    if service_name != "sqs":
        raise ValueError(f"shmfifo speaks SQS only, not {service_name!r}")
    return Client(directory)
