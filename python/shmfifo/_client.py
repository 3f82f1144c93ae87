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
import threading
import urllib.parse
import uuid
from typing import Any, Dict, Iterable, List, Optional, Tuple

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
    # Every exception boto3 models for SQS -> the codes that raise it (both SQS's query
    # protocol's and its JSON protocol's). Those a local queue never raises are here too, so
    # that an `except client.exceptions.X` written for boto3 works.
    "QueueDoesNotExist": ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"),
    "QueueNameExists": ("QueueAlreadyExists", "QueueNameExists"),
    "ReceiptHandleIsInvalid": ("ReceiptHandleIsInvalid",),
    "InvalidMessageContents": ("InvalidMessageContents",),
    "EmptyBatchRequest": ("AWS.SimpleQueueService.EmptyBatchRequest", "EmptyBatchRequest"),
    "TooManyEntriesInBatchRequest": (
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        "TooManyEntriesInBatchRequest",
    ),
    "BatchEntryIdsNotDistinct": (
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        "BatchEntryIdsNotDistinct",
    ),
    "InvalidBatchEntryId": ("AWS.SimpleQueueService.InvalidBatchEntryId", "InvalidBatchEntryId"),
    "BatchRequestTooLong": ("AWS.SimpleQueueService.BatchRequestTooLong", "BatchRequestTooLong"),
    "InvalidAttributeName": ("InvalidAttributeName",),
    "InvalidAttributeValue": ("InvalidAttributeValue",),
    "InvalidAddress": ("InvalidAddress",),
    "InvalidIdFormat": ("InvalidIdFormat",),
    "InvalidSecurity": ("InvalidSecurity",),
    "MessageNotInflight": ("AWS.SimpleQueueService.MessageNotInflight", "MessageNotInflight"),
    "OverLimit": ("OverLimit",),
    "PurgeQueueInProgress": ("AWS.SimpleQueueService.PurgeQueueInProgress", "PurgeQueueInProgress"),
    "QueueDeletedRecently": ("AWS.SimpleQueueService.QueueDeletedRecently", "QueueDeletedRecently"),
    "RequestThrottled": ("RequestThrottled",),
    "ResourceNotFoundException": ("ResourceNotFoundException",),
    "UnsupportedOperation": ("AWS.SimpleQueueService.UnsupportedOperation", "UnsupportedOperation"),
    "KmsAccessDenied": ("KMS.AccessDeniedException", "KmsAccessDenied"),
    "KmsDisabled": ("KMS.DisabledException", "KmsDisabled"),
    "KmsInvalidKeyUsage": ("KMS.InvalidKeyUsageException", "KmsInvalidKeyUsage"),
    "KmsInvalidState": ("KMS.InvalidStateException", "KmsInvalidState"),
    "KmsNotFound": ("KMS.NotFoundException", "KmsNotFound"),
    "KmsOptInRequired": ("KMS.OptInRequired", "KmsOptInRequired"),
    "KmsThrottled": ("KMS.ThrottlingException", "KmsThrottled"),
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

    def from_code(self, code: str) -> type:
        """The exception class of an error code (boto3's ``client.exceptions.from_code``);
        ``ClientError`` for a code with none of its own."""
        return self.of(code)


_NAME = re.compile(r"^[A-Za-z0-9_-]{1,75}\.fifo$")
# Every name GetQueueAttributes knows; those shmfifo has no value for (Policy, KMS settings,
# RedriveAllowPolicy, SqsManagedSseEnabled) are simply not returned.
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
    norm = []
    for name, a in attributes.items():
        if "BinaryValue" in a:
            v = a["BinaryValue"]
            norm.append((name, a["DataType"], v.encode() if isinstance(v, str) else bytes(v), True))
        else:
            norm.append((name, a["DataType"], str(a["StringValue"]).encode(), False))
    return _md5_of_attributes(norm)


def _md5_of_attributes(norm: List[Tuple[str, str, bytes, bool]]) -> str:
    """``md5_of_message_attributes`` of attributes as ``(name, data type, value bytes,
    binary)``, the values as they are sent."""
    out = bytearray()
    for name, t, v, binary in sorted(norm, key=lambda a: a[0]):
        for part in (name.encode(), t.encode()):
            out += struct.pack(">I", len(part)) + part
        out += b"\x02" if binary else b"\x01"
        out += struct.pack(">I", len(v)) + v
    return _md5(bytes(out))


def _want(names: Optional[Iterable[str]], name: str) -> bool:
    if not names:
        return False
    for n in names:
        if n in ("All", ".*") or n == name or (n.endswith(".*") and name.startswith(n[:-1])):
            return True
    return False


# The library's errors (by ``Error.kind``) that ``shmfifo serve`` answers with another code:
# (code, sender's fault, HTTP status), as serve/src/protocol.rs maps them.
_SERVE_CODES = {
    "SizeClassFull": ("OverLimit", True, 403),
    "NoSpace": ("OverLimit", True, 403),
    "GroupLimitReached": ("OverLimit", True, 403),
    "DedupTableFull": ("OverLimit", True, 403),
    "ParticipantLimitReached": ("OverLimit", True, 403),
    "UntrustedFile": ("AccessDenied", True, 403),
    "ReceiptHandleIsInvalid": ("ReceiptHandleIsInvalid", True, 404),
    "DeadLetterQueue": ("InvalidParameterValue", True, 400),
    "NotReady": ("ServiceUnavailable", False, 503),
    "DedupInProgress": ("ServiceUnavailable", False, 503),
}


# The keys of a SendMessageBatch entry (botocore's SendMessageBatchRequestEntry).
_BATCH_ENTRY_KEYS = frozenset(
    (
        "Id",
        "MessageBody",
        "DelaySeconds",
        "MessageAttributes",
        "MessageSystemAttributes",
        "MessageDeduplicationId",
        "MessageGroupId",
    )
)


def _param_error(report: str) -> Exception:
    """What boto3 raises for a parameter its model does not know: botocore's
    ``ParamValidationError`` where botocore is installed, else ``TypeError``."""
    try:
        from botocore.exceptions import ParamValidationError
    except ImportError:
        return TypeError(report)
    return ParamValidationError(report=report)


def _entry_failed(eid: str, code: str, msg: str, sender: bool, kind: str) -> dict:
    """A batch entry's failure as serve answers it (``_SERVE_CODES``)."""
    mapped = _SERVE_CODES.get(kind)
    if mapped is not None:
        code, sender = mapped[0], mapped[1]
    return {"Id": eid, "SenderFault": sender, "Code": code, "Message": msg}


class Client:
    """The boto3-shaped client (see the module doc); make one with :func:`client`."""

    def __init__(self, directory: str = "/dev/shm") -> None:
        self._dir = os.path.abspath(directory)
        self._open: Dict[str, RawQueue] = {}
        self._pid = os.getpid()
        # Guards `_open` and `_pid`: a client is shared between threads, as boto3's.
        self._lock = threading.Lock()
        self.exceptions = _Exceptions()

    # -- plumbing ---------------------------------------------------------------------------

    def _raise(self, op: str, code: str, message: str, sender: bool = True, status: Optional[int] = None) -> None:
        if status is None:
            status = 400 if sender else 500
        resp = {
            "Error": {"Code": code, "Message": message, "Type": "Sender" if sender else "Receiver"},
            "ResponseMetadata": dict(_meta(), HTTPStatusCode=status),
        }
        raise self.exceptions.of(code)(resp, op)

    def _path(self, op: str, url: str) -> str:
        if not isinstance(url, str) or not url:
            self._raise(op, "InvalidAddress", "The address is not valid for this endpoint.")
        if url.startswith(("https://", "http://")):
            # A queue URL of SQS's form (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME, or a
            # local endpoint's, as `shmfifo serve` answers): the queue NAME of this client's
            # directory, as an ARN names it by its last field. It was taken as a relative path.
            parts = urllib.parse.urlsplit(url).path.strip("/").split("/")
            if len(parts) != 2 or not _NAME.match(parts[1]):
                self._raise(op, "AWS.SimpleQueueService.NonExistentQueue", f"The specified queue does not exist: {url} (a queue URL is .../ACCOUNT/NAME.fifo)")
            return os.path.join(self._dir, parts[1])
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
        with self._lock:
            if os.getpid() != self._pid:
                # A child forked from the process that made this client: the handles are the
                # parent's participants (each refuses the child), so the child opens its own.
                self._open = {}
                self._pid = os.getpid()
            q = self._open.get(path)
        if q is not None:
            # A URL names the queue there now, as SQS's does: one deleted since this client
            # opened it is gone (QueueDoesNotExist), one made again in its place is the new
            # queue. The handle kept would go on using the deleted file, where no one else
            # looks. (A stat and an fstat a call.) A stale handle is let go, not closed: another
            # thread may be using it; it is released when the last one is done with it.
            try:
                st = os.stat(path)
                same = (st.st_dev, st.st_ino) == q.file_id()
            except (OSError, ValueError):  # gone, or the handle closed by close()
                same = False
            if same:
                return q
            with self._lock:
                if self._open.get(path) is q:
                    del self._open[path]
        opened = self._call(op, RawQueue.open, path)
        with self._lock:
            # Another thread may have opened it meanwhile: one handle a path is kept.
            return self._open.setdefault(path, opened)

    def _text(self, op: str, name: str, v: Any, required: bool = True) -> Optional[str]:
        """A string parameter, refused before anything is done when it is not one (boto3
        checks its parameters' types before a request is sent)."""
        if v is None and not required:
            return None
        if not isinstance(v, str):
            self._raise(op, "InvalidParameterValue", f"Invalid type for parameter {name}, value: {v!r}, type: {type(v)}, valid types: <class 'str'>")
        return v

    def _int(self, op: str, name: str, v: Any, required: bool = True) -> Optional[int]:
        """A whole-number parameter, at least 0 (SQS's upper bounds are the library's)."""
        if v is None and not required:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            self._raise(op, "InvalidParameterValue", f"Value {v!r} for parameter {name} is invalid. Reason: must be a whole number of at least 0.")
        return v

    def _names(self, op: str, name: str, v: Any) -> List[str]:
        """A list-of-names parameter (``AttributeNames`` …): a list or tuple of strings. A
        plain string was read one character at a time (``AttributeNames="All"`` asked for
        attributes "A", "l", "l")."""
        if v is None:
            return []
        if not isinstance(v, (list, tuple)) or not all(isinstance(n, str) for n in v):
            self._raise(op, "InvalidParameterValue", f"Invalid type for parameter {name}, value: {v!r}, type: {type(v)}, valid types: <class 'list'>, <class 'tuple'> of <class 'str'>")
        return list(v)

    def _attribute_values(self, op: str, attrs: Optional[Dict[str, Any]]) -> Dict[str, str]:
        """Queue attributes as the library takes them: strings (a whole number is taken as its
        digits); anything else is refused, naming the attribute, before any is applied."""
        if attrs is None:
            return {}
        if not isinstance(attrs, dict):
            self._raise(op, "InvalidParameterValue", f"Invalid type for parameter Attributes, value: {attrs!r}, type: {type(attrs)}, valid types: <class 'dict'>")
        out = {}
        for k, v in attrs.items():
            if isinstance(v, int) and not isinstance(v, bool):
                v = str(v)
            if not isinstance(k, str):
                self._raise(op, "InvalidAttributeName", f"Unknown Attribute {k!r}.")
            if not isinstance(v, str):
                self._raise(op, "InvalidAttributeValue", f"Invalid value for the parameter {k}. Reason: attribute values are strings, not {type(v).__name__} ({v!r}).")
            out[k] = v
        return out

    def _text_queue(self, op: str, q: RawQueue) -> None:
        """Refuses a binary queue before a receive takes anything: its bodies are bytes, which
        a message of SQS's (text) cannot carry, and a message taken could not be returned."""
        if q.body_mode() != "text":
            self._raise(op, "AWS.SimpleQueueService.UnsupportedOperation", "the queue's bodies are bytes (created with body_mode binary); the boto3-shaped client is text, as SQS is: receive with shmfifo.Queue")

    def _system_attributes(self, op: str, attrs: Optional[Dict[str, Any]]) -> None:
        """``MessageSystemAttributes``: SQS takes only ``AWSTraceHeader`` (a String), and so do
        we, checked and not kept (as serve: there is no X-Ray here to read it). boto3 code
        instrumented for X-Ray passed it and got a TypeError."""
        if attrs is None:
            return
        if not isinstance(attrs, dict):
            self._raise(op, "InvalidParameterValue", "MessageSystemAttributes must be a map.")
        for name, v in attrs.items():
            if name != "AWSTraceHeader":
                self._raise(op, "InvalidParameterValue", f"Message system attribute name {name!r} is invalid (only AWSTraceHeader).")
            if not isinstance(v, dict) or v.get("DataType") != "String" or not isinstance(v.get("StringValue"), str):
                self._raise(op, "InvalidParameterValue", "AWSTraceHeader must be a String attribute: {'DataType': 'String', 'StringValue': ...}.")

    def _call(self, op: str, fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except Error as e:
            self._raise_error(op, e)

    def _raise_error(self, op: str, e: Error) -> None:
        """A library error as ``shmfifo serve`` answers it (serve/src/protocol.rs), so that one
        program sees the same code, fault and status here and through serve: what the caller
        can fix or wait out is theirs in SQS's words (a full queue is ``OverLimit``, a
        dead-letter queue that is missing or too small ``InvalidParameterValue``), and only
        faults of the queue files are the receiver's. A missing dead-letter queue was
        ``shmfifo.DeadLetterQueue``, 500 Receiver here (which retry logic retries) and 400
        through serve."""
        mapped = _SERVE_CODES.get(e.kind)
        if mapped is not None:
            code, sender, status = mapped
        elif e.code == "ServiceUnavailable":  # a participant busy: serve's 503, retryable
            code, sender, status = e.code, False, 503
        else:
            sender = not e.code.startswith("shmfifo.")
            code, status = e.code, 400 if sender else 500
        self._raise(op, code, e.message, sender, status)

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

    def _attributes_in(self, op: str, attrs: Optional[Dict[str, Dict[str, Any]]], where: str = "MessageAttributes"):
        """A message's attributes as sent, ``[(name, data type, value bytes)]``, and their
        ``MD5OfMessageAttributes``; checked as boto3 checks them before it sends (the types
        of its model: a ``StringValue`` a ``str``, a ``BinaryValue`` bytes or a ``str``, sent
        as UTF-8), so that nothing is sent that the answer cannot describe."""
        if attrs is None:
            return None, None
        if not isinstance(attrs, dict):
            raise _param_error(f"Invalid type for parameter {where}, value: {attrs!r}, type: {type(attrs)}, valid types: <class 'dict'>")
        if not attrs:
            return None, None
        out, norm = [], []
        for name, a in attrs.items():
            if not isinstance(name, str):
                raise _param_error(f"Invalid type for parameter {where} key, value: {name!r}, type: {type(name)}, valid types: <class 'str'>")
            if not isinstance(a, dict):
                raise _param_error(f"Invalid type for parameter {where}.{name}, value: {a!r}, type: {type(a)}, valid types: <class 'dict'>")
            t = a.get("DataType")
            if not isinstance(t, str):
                if t is not None:
                    raise _param_error(f"Invalid type for parameter {where}.{name}.DataType, value: {t!r}, type: {type(t)}, valid types: <class 'str'>")
                self._raise(op, "InvalidParameterValue", f"The message attribute '{name}' must contain a non-empty message attribute type.")
            if not t:
                self._raise(op, "InvalidParameterValue", f"The message attribute '{name}' must contain a non-empty message attribute type.")
            # The field a type's value goes in, as SQS (and serve) has it: the checksum's
            # transport byte follows the type.
            # (The field the type wants, and the other: a value only in the other is refused.)
            want, other = ("Binary", "String") if t.split(".")[0] == "Binary" else ("String", "Binary")
            if f"{other}Value" in a and f"{want}Value" not in a:
                self._raise(op, "InvalidParameterValue", f"The message attribute '{name}' with type '{t}' must use field '{want}'.")
            if "BinaryValue" in a:
                v = a["BinaryValue"]
                if isinstance(v, str):
                    v = v.encode()
                elif isinstance(v, (bytes, bytearray)):
                    v = bytes(v)
                else:
                    raise _param_error(f"Invalid type for parameter {where}.{name}.BinaryValue, value: {v!r}, type: {type(v)}, valid types: <class 'bytes'>, <class 'bytearray'>, <class 'str'>")
                binary = True
            elif "StringValue" in a:
                v = a["StringValue"]
                if not isinstance(v, str):
                    raise _param_error(f"Invalid type for parameter {where}.{name}.StringValue, value: {v!r}, type: {type(v)}, valid types: <class 'str'>")
                v = v.encode()
                binary = False
            else:
                self._raise(op, "InvalidParameterValue", f"The message attribute '{name}' must contain a non-empty message attribute value.")
            out.append((name, t, v))
            norm.append((name, t, v, binary))
        return out, _md5_of_attributes(norm)

    # -- queues -----------------------------------------------------------------------------

    def create_queue(self, *, QueueName: str, Attributes: Optional[Dict[str, str]] = None, tags: Optional[Dict[str, str]] = None) -> dict:
        op = "CreateQueue"
        attrs = self._attribute_values(op, Attributes)
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
            made = RawQueue.create(path, list(attrs.items()))
            with self._lock:
                self._open[path] = made  # replaces a deleted queue's handle, if one was kept
        except Error as e:
            if e.code != "QueueAlreadyExists":
                self._raise_error(op, e)
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
        op = "GetQueueUrl"
        self._text(op, "QueueName", QueueName)
        self._text(op, "QueueOwnerAWSAccountId", QueueOwnerAWSAccountId, required=False)
        path = os.path.join(self._dir, QueueName)
        self._queue(op, path)
        return {"QueueUrl": self._url(path), "ResponseMetadata": _meta()}

    def list_queues(self, *, QueueNamePrefix: str = "", MaxResults: Optional[int] = None, NextToken: Optional[str] = None) -> dict:
        op = "ListQueues"
        if MaxResults is not None and (not isinstance(MaxResults, int) or isinstance(MaxResults, bool) or not 1 <= MaxResults <= 1000):
            self._raise(op, "InvalidParameterValue", f"Value {MaxResults!r} for parameter MaxResults is invalid. Reason: must be between 1 and 1000.")
        self._text(op, "NextToken", NextToken, required=False)
        self._text(op, "QueueNamePrefix", QueueNamePrefix)
        try:
            listed = os.listdir(self._dir)
        except FileNotFoundError:
            self._raise(op, "AWS.SimpleQueueService.NonExistentQueue", f"no directory {self._dir}/ (the client's directory): make it first")
        # The token is the last name an answer listed: the next page starts after it (names
        # sorted), so a queue made or deleted between pages moves no other (as `shmfifo serve`).
        names = sorted(
            n for n in listed
            if n.endswith(".fifo") and n.startswith(QueueNamePrefix) and n > (NextToken or "")
            and os.path.isfile(os.path.join(self._dir, n))
        )
        out: dict = {"ResponseMetadata": _meta()}
        if MaxResults is None:
            names = names[:1000]  # SQS: at most 1,000 without MaxResults, and no token
        elif len(names) > MaxResults:
            names = names[:MaxResults]
            out["NextToken"] = names[-1]
        if names:
            out["QueueUrls"] = [self._url(os.path.join(self._dir, n)) for n in names]
        return out

    def delete_queue(self, *, QueueUrl: str) -> dict:
        op = "DeleteQueue"
        path = self._path(op, QueueUrl)
        with self._lock:
            self._open.pop(path, None)  # released when no other thread uses it
        self._call(op, RawQueue.unlink, path)
        return {"ResponseMetadata": _meta()}

    def purge_queue(self, *, QueueUrl: str) -> dict:
        op = "PurgeQueue"
        self._call(op, self._queue(op, QueueUrl).purge)
        return {"ResponseMetadata": _meta()}

    def get_queue_attributes(self, *, QueueUrl: str, AttributeNames: Optional[List[str]] = None) -> dict:
        op = "GetQueueAttributes"
        AttributeNames = self._names(op, "AttributeNames", AttributeNames)
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
        attrs = self._attribute_values(op, Attributes)
        if "RedrivePolicy" in attrs and attrs["RedrivePolicy"]:
            attrs["RedrivePolicy"] = self._local_policy(attrs["RedrivePolicy"])
        # All or nothing, as SQS: one bad name or value changes none.
        self._call(op, q.set_attributes, list(attrs.items()))
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
        MessageSystemAttributes: Optional[Dict[str, Dict[str, Any]]] = None,
    ) -> dict:
        op = "SendMessage"
        self._system_attributes(op, MessageSystemAttributes)
        self._text(op, "MessageBody", MessageBody)
        self._text(op, "MessageGroupId", MessageGroupId, required=False)
        self._text(op, "MessageDeduplicationId", MessageDeduplicationId, required=False)
        self._int(op, "DelaySeconds", DelaySeconds, required=False)
        # Everything the answer describes is computed before the send: nothing raises after
        # a message is sent (a caller that retries would send it twice).
        attrs, attrs_md5 = self._attributes_in(op, MessageAttributes)
        body_md5 = _md5(MessageBody.encode())
        q = self._queue(op, QueueUrl)
        mid, seq, _dup = self._call(op, q.send, MessageGroupId, MessageBody, MessageDeduplicationId, attrs, DelaySeconds)
        out = {"MD5OfMessageBody": body_md5, "MessageId": mid, "SequenceNumber": seq, "ResponseMetadata": _meta()}
        if attrs_md5 is not None:
            out["MD5OfMessageAttributes"] = attrs_md5
        return out

    def send_message_batch(self, *, QueueUrl: str, Entries: List[Dict[str, Any]]) -> dict:
        op = "SendMessageBatch"
        if not isinstance(Entries, list) or not all(isinstance(e, dict) for e in Entries):
            self._raise(op, "InvalidParameterValue", "Entries must be a list of dicts.")
        for e in Entries:
            unknown = set(e) - _BATCH_ENTRY_KEYS
            if unknown:
                # boto3 refuses these before sending: they were dropped without a word.
                raise _param_error(f"Unknown parameter in Entries: {sorted(unknown)}, must be one of: {', '.join(sorted(_BATCH_ENTRY_KEYS))}")
            self._system_attributes(op, e.get("MessageSystemAttributes"))
            self._text(op, "MessageBody", e.get("MessageBody", ""))
            self._text(op, "MessageGroupId", e.get("MessageGroupId"), required=False)
            self._text(op, "MessageDeduplicationId", e.get("MessageDeduplicationId"), required=False)
            self._int(op, "DelaySeconds", e.get("DelaySeconds"), required=False)
        # As in `send_message`: the answer's checksums before anything is sent.
        described = {}
        entries = []
        for k, e in enumerate(Entries):
            attrs, attrs_md5 = self._attributes_in(op, e.get("MessageAttributes"), f"Entries[{k}].MessageAttributes")
            body = e.get("MessageBody", "")
            described.setdefault(e.get("Id", ""), (_md5(body.encode()), attrs_md5))
            entries.append((e.get("Id", ""), e.get("MessageGroupId"), body, e.get("MessageDeduplicationId"), attrs, e.get("DelaySeconds")))
        q = self._queue(op, QueueUrl)
        ok, failed = [], []
        for eid, success, payload in self._call(op, q.send_batch, entries):
            if success:
                mid, seq, _dup = payload
                body_md5, attrs_md5 = described[eid]
                r = {"Id": eid, "MessageId": mid, "MD5OfMessageBody": body_md5, "SequenceNumber": seq}
                if attrs_md5 is not None:
                    r["MD5OfMessageAttributes"] = attrs_md5
                ok.append(r)
            else:
                failed.append(_entry_failed(eid, *payload))
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
        AttributeNames = self._names(op, "AttributeNames", AttributeNames)
        MessageSystemAttributeNames = self._names(op, "MessageSystemAttributeNames", MessageSystemAttributeNames)
        MessageAttributeNames = self._names(op, "MessageAttributeNames", MessageAttributeNames)
        self._text(op, "ReceiveRequestAttemptId", ReceiveRequestAttemptId, required=False)
        q = self._queue(op, QueueUrl)
        for name, v in (("MaxNumberOfMessages", MaxNumberOfMessages), ("VisibilityTimeout", VisibilityTimeout), ("WaitTimeSeconds", WaitTimeSeconds)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                self._raise(op, "InvalidParameterValue", f"Value {v} for parameter {name} is invalid.")
        for name, v, most in (("MaxNumberOfMessages", MaxNumberOfMessages, 10), ("VisibilityTimeout", VisibilityTimeout, 43200), ("WaitTimeSeconds", WaitTimeSeconds, 20)):
            if v is not None and (v > most or (name == "MaxNumberOfMessages" and v < 1)):
                bounds = "1 and 10, if provided" if name == "MaxNumberOfMessages" else f"0 and {most} seconds"
                self._raise(op, "InvalidParameterValue", f"Value {v} for parameter {name} is invalid. Reason: Must be between {bounds}.")
        # After the request's own errors (R1), before anything is taken.
        self._text_queue(op, q)
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
        self._text(op, "ReceiptHandle", ReceiptHandle)
        self._call(op, self._queue(op, QueueUrl).delete, ReceiptHandle)
        return {"ResponseMetadata": _meta()}

    def delete_message_batch(self, *, QueueUrl: str, Entries: List[Dict[str, str]]) -> dict:
        op = "DeleteMessageBatch"
        if not isinstance(Entries, list) or not all(isinstance(e, dict) for e in Entries):
            self._raise(op, "InvalidParameterValue", "Entries must be a list of dicts.")
        q = self._queue(op, QueueUrl)
        res = self._call(op, q.delete_batch, [(e.get("Id", ""), e.get("ReceiptHandle", "")) for e in Entries])
        return self._batch_out(res)

    def change_message_visibility(self, *, QueueUrl: str, ReceiptHandle: str, VisibilityTimeout: int) -> dict:
        op = "ChangeMessageVisibility"
        self._text(op, "ReceiptHandle", ReceiptHandle)
        timeout = self._int(op, "VisibilityTimeout", VisibilityTimeout)
        self._call(op, self._queue(op, QueueUrl).change_visibility, ReceiptHandle, timeout * 1000)
        return {"ResponseMetadata": _meta()}

    def change_message_visibility_batch(self, *, QueueUrl: str, Entries: List[Dict[str, Any]]) -> dict:
        op = "ChangeMessageVisibilityBatch"
        if not isinstance(Entries, list) or not all(isinstance(e, dict) for e in Entries):
            self._raise(op, "InvalidParameterValue", "Entries must be a list of dicts.")
        q = self._queue(op, QueueUrl)
        timeouts = [self._int(op, "VisibilityTimeout", e.get("VisibilityTimeout", 0)) for e in Entries]
        res = self._call(
            op,
            q.change_visibility_batch,
            [(e.get("Id", ""), e.get("ReceiptHandle", ""), t * 1000) for e, t in zip(Entries, timeouts)],
        )
        return self._batch_out(res)

    @staticmethod
    def _batch_out(res) -> dict:
        ok, failed = [], []
        for eid, fail in res:
            if fail is None:
                ok.append({"Id": eid})
            else:
                failed.append(_entry_failed(eid, *fail))
        return {"Successful": ok, "Failed": failed, "ResponseMetadata": _meta()}

    def __reduce__(self):
        # Handed to a spawned child it failed naming a native class or a lock.
        raise TypeError(
            "a shmfifo client holds this process's queue handles and cannot be pickled: make "
            "one in the other process (shmfifo.client(\"sqs\", directory=...))"
        )

    def close(self) -> None:
        """Releases every queue handle this client opened."""
        with self._lock:
            handles, self._open = list(self._open.values()), {}
        for q in handles:
            q.close()


def client(service_name: str = "sqs", *, directory: str = "/dev/shm", **_aws: Any) -> Client:
    """``boto3.client("sqs", …)`` for local queues: the queues are files in ``directory``.
    AWS settings (``region_name``, ``endpoint_url``, credentials) are accepted and unused."""
    if service_name != "sqs":
        raise ValueError(f"shmfifo speaks SQS only, not {service_name!r}")
    return Client(directory)
