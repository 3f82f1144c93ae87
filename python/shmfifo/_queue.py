"""The Pythonic layer: ``Queue``, ``Message``, ``SendResult``."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from ._shmfifo import RawQueue

#: A message attribute value: ``str`` (``String``), ``bytes`` (``Binary``), ``int`` or
#: ``float`` (``Number``), or ``(data_type, value)`` for a custom type such as
#: ``("Number.float", "1.5")``.
AttributeValue = Union[str, bytes, int, float, Tuple[str, Union[str, bytes]]]


def _ms(seconds: Optional[float], name: str = "seconds") -> Optional[int]:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{name}: a number of seconds, not {type(seconds).__name__}")
    if not 0 <= seconds < 1e15:  # NaN and infinity too
        raise ValueError(f"{name}: a duration of at least 0 seconds, not {seconds!r}")
    return int(round(seconds * 1000))


def _count(v: Optional[int], name: str) -> Optional[int]:
    """A whole number of at least 0 (the library checks the upper bounds, with SQS's codes)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: a whole number, not {type(v).__name__}")
    if v < 0:
        raise ValueError(f"{name}: cannot be negative ({v})")
    return v


def _body(body: object) -> Union[str, bytes]:
    if isinstance(body, str):
        return body
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    raise TypeError(f"body: str, or bytes, not {type(body).__name__}")


_ENTRY_KEYS = frozenset(("group_id", "body", "dedup_id", "attributes"))


def _entries(entries: object) -> list:
    """A batch's entries: a list or other iterable of them, not a string (whose characters
    would each be an entry)."""
    if isinstance(entries, (str, bytes)):
        raise TypeError("a batch is a list of entries, not a string")
    return list(entries)  # type: ignore[call-overload]


def _handle_of(i: int, m: object) -> str:
    """The receipt handle of a batch entry: a received ``Message`` or a handle's text."""
    if isinstance(m, str):
        return m
    handle = getattr(m, "receipt_handle", None)
    if not isinstance(handle, str) or not handle:
        raise TypeError(f"entry {i}: a received Message or a receipt handle, not {m!r}")
    return handle


def _batch_entry(i: int, m: object):
    """A ``send_batch`` entry as ``(group_id, body, dedup_id, attributes)``. A plain string was
    unpacked as a tuple (``"hello"`` sent body ``'e'`` to group ``'h'``), a fourth element was
    dropped and a dict without ``body`` raised ``KeyError``: each is a ``TypeError`` naming
    the entry now."""
    if isinstance(m, Mapping):
        unknown = set(m) - _ENTRY_KEYS
        if unknown:
            raise TypeError(f"entry {i}: unknown keys {sorted(unknown)} (takes {sorted(_ENTRY_KEYS)})")
        if "group_id" not in m or "body" not in m:
            raise TypeError(f"entry {i}: a dict needs group_id and body")
        return m["group_id"], m["body"], m.get("dedup_id"), m.get("attributes")
    if not isinstance(m, (tuple, list)):
        raise TypeError(
            f"entry {i}: (group_id, body[, dedup_id[, attributes]]) or a dict, "
            f"not {type(m).__name__}"
        )
    if not 2 <= len(m) <= 4:
        raise TypeError(
            f"entry {i}: (group_id, body[, dedup_id[, attributes]]), not {len(m)} values"
        )
    g, b, d, a = tuple(m) + (None,) * (4 - len(m))
    return g, b, d, a


def _attributes_in(attributes: Optional[Mapping[str, AttributeValue]]):
    if not attributes:
        return None
    out = []
    for name, v in attributes.items():
        if isinstance(v, tuple):
            data_type, value = v
        elif isinstance(v, bool):
            raise TypeError(f"attribute {name!r}: a bool is neither text nor a number")
        elif isinstance(v, (int, float)):
            data_type, value = "Number", repr(v)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            data_type, value = "Binary", bytes(v)
        elif isinstance(v, str):
            data_type, value = "String", v
        else:
            raise TypeError(f"attribute {name!r}: {type(v).__name__} is not an attribute value")
        out.append((name, data_type, value.encode() if isinstance(value, str) else bytes(value)))
    return out


@dataclass(frozen=True)
class SendResult:
    """What a send returns."""

    message_id: str
    #: Increasing within the group; a decimal string (it is 128 bits).
    sequence_number: str
    #: The send was a duplicate within the deduplication interval: nothing was enqueued, and
    #: the id and sequence number are the original message's.
    duplicate: bool


@dataclass
class Message:
    """A received message. ``delete()`` and ``change_visibility()`` act on this receive."""

    message_id: str
    receipt_handle: str
    #: ``str``; ``bytes`` on a queue created with ``body_mode="binary"``.
    body: Union[str, bytes]
    group_id: str
    dedup_id: Optional[str]
    sequence_number: str
    #: ms since the Unix epoch.
    sent_timestamp: int
    #: ms since the Unix epoch.
    first_receive_timestamp: int
    receive_count: int
    #: name -> (data_type, value): ``str`` for String and Number types, ``bytes`` for Binary.
    attributes: Dict[str, Tuple[str, Union[str, bytes]]] = field(default_factory=dict)
    #: For a message moved here by a redrive policy, the path of the queue it came from.
    dead_letter_source: Optional[str] = None
    _queue: Optional["Queue"] = field(default=None, repr=False, compare=False)

    @classmethod
    def _of(cls, d: dict, queue: Optional["Queue"]) -> "Message":
        attrs = {name: (t, v) for name, t, v in d.pop("attributes")}
        return cls(attributes=attrs, _queue=queue, **d)

    def _received(self) -> "Queue":
        if self._queue is None:
            if self.receipt_handle:
                raise ValueError("this message was copied from another process (pickled) and has no queue here: delete it or change its visibility by its receipt handle with a Queue opened here (queue.delete(m.receipt_handle))")
            raise ValueError("a message from peek() has no receipt handle: receive it to delete it or change its visibility")
        return self._queue

    def __copy__(self) -> "Message":
        # A copy within the process acts on the same receive (pickling drops the queue).
        return dataclasses.replace(self)

    def __deepcopy__(self, memo: dict) -> "Message":
        return dataclasses.replace(self, attributes=copy.deepcopy(self.attributes, memo))

    def __getstate__(self) -> dict:
        # Pickled (handed to a process pool) as its data: the queue handle is this process's
        # (pickling it failed, naming a Queue); its receipt handle goes along.
        state = dict(self.__dict__)
        state["_queue"] = None
        return state

    def delete(self) -> None:
        """Deletes the message (this receive's handle)."""
        self._received().delete(self)

    def change_visibility(self, seconds: float) -> None:
        """Hides the message for ``seconds`` more from now (0: visible at once)."""
        self._received().change_visibility(self, seconds)


class Redriven(int):
    """What :meth:`Queue.redrive` did: the messages moved (its value, as an ``int``), the
    messages it left in the dead-letter queue (``skipped``: their source queue gone or
    refusing them), and whether it was cancelled before the end."""

    skipped: int
    cancelled: bool

    def __new__(cls, moved: int, skipped: int = 0, cancelled: bool = False) -> "Redriven":
        r = super().__new__(cls, moved)
        r.skipped = skipped
        r.cancelled = cancelled
        return r

    def __repr__(self) -> str:
        return f"Redriven(moved={int(self)}, skipped={self.skipped}, cancelled={self.cancelled})"


class Queue:
    """A shmfifo queue: SQS FIFO semantics between the processes of one host.

    Create or open one by name (a file under /dev/shm) or path; the handle is one participant
    of the queue until ``close()`` (or the end of a ``with`` block, or garbage collection).
    A queue takes ``max_participants`` handles at once (64 by default): open one a process and
    share it between its threads. A child process opens its own (after ``fork``, the parent's
    handle raises ``ValueError`` in the child). Every method may raise ``shmfifo.Error`` with
    SQS's error code; an argument of the wrong type or sign raises ``TypeError`` or
    ``ValueError`` naming it, as does a closed handle.
    """

    def __init__(self, raw: RawQueue) -> None:
        if not isinstance(raw, RawQueue):
            raise TypeError("make a Queue with Queue.create(name) or Queue.open(name)")
        self._raw = raw

    @classmethod
    def create(
        cls,
        name: str,
        *,
        visibility_timeout: Optional[float] = None,
        delay: Optional[float] = None,
        message_retention_period: Optional[float] = None,
        receive_message_wait_time: Optional[float] = None,
        maximum_message_size: Optional[int] = None,
        content_based_deduplication: Optional[bool] = None,
        deduplication_scope: Optional[str] = None,
        redrive_policy: Optional[Tuple[str, int]] = None,
        max_messages: Optional[int] = None,
        max_groups: Optional[int] = None,
        max_participants: Optional[int] = None,
        deduplication: Optional[str] = None,
        dedup_entries: Optional[int] = None,
        test_clock: bool = False,
        body_mode: Optional[str] = None,
        size_limit: Optional[int] = None,
        fifo_throughput_limit: Optional[str] = None,
    ) -> "Queue":
        """Creates a queue (an error if it exists). Durations in seconds (whole seconds, as
        SQS's attributes); ``deduplication_scope`` ``"queue"`` or ``"messageGroup"``;
        ``redrive_policy`` ``(dead_letter_queue_name_or_path, max_receive_count)`` (or SQS's
        dict); ``fifo_throughput_limit`` ``"perQueue"`` or ``"perMessageGroupId"`` (SQS's
        high-throughput mode, with ``deduplication_scope="messageGroup"``; fixed at creation); the
        sizes (``max_messages``, ``max_groups``, ``max_participants``, ``dedup_entries``)
        and ``deduplication="off"`` (no dedup ids at all) are shmfifo's own, as is
        ``test_clock=True``: the queue's time stands still until ``advance_clock`` moves it,
        so every timeout runs in microseconds in a test (waits stay real time), and
        ``body_mode="binary"``: bodies of any bytes (sent as ``bytes``, received as ``bytes``;
        the default ``"text"`` is SQS's rule), and ``size_limit``: the most bytes the queue's
        file may grow to as its size classes fill (default 1 GiB, at most the base file plus a
        quarter of the file system's space left free beside it; 0: never grow)."""
        attrs: List[Tuple[str, str]] = []

        def secs(name: str, keyword: str, v: Optional[float]) -> None:
            # The keyword named, as the caller wrote it (the SQS attribute beside it).
            if v is not None:
                _ms(v, keyword)
                if v != int(v):
                    raise ValueError(f"{keyword}: whole seconds, as SQS takes them ({name})")
                attrs.append((name, str(int(v))))

        secs("VisibilityTimeout", "visibility_timeout", visibility_timeout)
        secs("DelaySeconds", "delay", delay)
        secs("MessageRetentionPeriod", "message_retention_period", message_retention_period)
        secs("ReceiveMessageWaitTimeSeconds", "receive_message_wait_time", receive_message_wait_time)
        if maximum_message_size is not None:
            attrs.append(("MaximumMessageSize", str(_count(maximum_message_size, "maximum_message_size"))))
        if content_based_deduplication is not None:
            attrs.append(("ContentBasedDeduplication", "true" if content_based_deduplication else "false"))
        if deduplication_scope is not None:
            attrs.append(("DeduplicationScope", deduplication_scope))
        if fifo_throughput_limit is not None:
            attrs.append(("FifoThroughputLimit", fifo_throughput_limit))
        if redrive_policy is not None:
            if isinstance(redrive_policy, Mapping):
                target, count = redrive_policy.get("deadLetterTargetArn"), redrive_policy.get("maxReceiveCount")
            elif isinstance(redrive_policy, (tuple, list)) and len(redrive_policy) == 2:
                target, count = redrive_policy
            else:
                raise TypeError("redrive_policy: (dead_letter_queue, max_receive_count), or SQS's dict")
            import json

            attrs.append(("RedrivePolicy", json.dumps({"deadLetterTargetArn": target, "maxReceiveCount": count})))
        raw = RawQueue.create(
            name,
            attrs,
            max_messages=_count(max_messages, "max_messages"),
            max_groups=_count(max_groups, "max_groups"),
            max_participants=_count(max_participants, "max_participants"),
            deduplication=deduplication,
            dedup_entries=_count(dedup_entries, "dedup_entries"),
            test_clock=test_clock,
            body_mode=body_mode,
            size_limit=_count(size_limit, "size_limit"),
        )
        return cls(raw)

    @classmethod
    def open(cls, name: str) -> "Queue":
        """Opens an existing queue by name or path."""
        return cls(RawQueue.open(name))

    @staticmethod
    def unlink(name: str) -> None:
        """Removes a queue's file; processes that have it open keep using it."""
        RawQueue.unlink(name)

    def close(self) -> None:
        """Releases this handle (its participant); later calls raise ``ValueError``. Another
        thread's waiting ``receive`` returns no message within 100 ms, and its ``messages()``
        ends."""
        self._raw.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (in any thread)."""
        return self._raw.is_closed()

    def __enter__(self) -> "Queue":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def path(self) -> Optional[str]:
        """The queue file's path."""
        return self._raw.path()

    def send(
        self,
        group_id: str,
        body: Union[str, bytes],
        *,
        dedup_id: Optional[str] = None,
        attributes: Optional[Mapping[str, AttributeValue]] = None,
    ) -> SendResult:
        """Sends one message to ``group_id``; ``dedup_id`` is required unless the queue has
        content-based deduplication (or none). ``body`` is ``str``, or ``bytes``: any bytes
        on a binary queue, text on a text queue."""
        return SendResult(*self._raw.send(group_id, _body(body), dedup_id, _attributes_in(attributes)))

    def send_batch(
        self,
        messages: Iterable[
            Union[
                Tuple[str, Union[str, bytes]],
                Tuple[str, Union[str, bytes], Optional[str]],
                Tuple[str, Union[str, bytes], Optional[str], Optional[Mapping[str, AttributeValue]]],
                Mapping,
            ]
        ],
    ) -> List[Union[SendResult, Exception]]:
        """Sends up to 10 messages in one request, each ``(group_id, body)``,
        ``(group_id, body, dedup_id)``, ``(group_id, body, dedup_id, attributes)`` or a dict
        with ``group_id``, ``body`` and optionally ``dedup_id``, ``attributes`` (any other
        shape, a plain string included, raises ``TypeError`` naming the entry). Returns, in order, a ``SendResult`` or the entry's ``shmfifo.Error``
        (an entry that fails alone: a body too large, a bad attribute). What SQS refuses for
        the whole request raises ``shmfifo.Error`` and sends nothing (S12): no entry or more
        than 10, more than 1 MiB in all, an entry without a group, or without a dedup id where
        the queue needs one."""
        from ._errors import Error

        entries = []
        for i, m in enumerate(messages):
            g, b, d, a = _batch_entry(i, m)
            entries.append((str(i), g, _body(b), d, _attributes_in(a), None))
        out: List[Union[SendResult, Exception]] = []
        for _id, ok, payload in self._raw.send_batch(entries):
            out.append(SendResult(*payload) if ok else Error(payload[0], payload[1], payload[3]))
        return out

    def receive(
        self,
        max_messages: int = 1,
        *,
        wait: Optional[float] = None,
        visibility_timeout: Optional[float] = None,
        attempt_id: Optional[str] = None,
    ) -> List[Message]:
        """Receives up to ``max_messages`` (1–10), waiting up to ``wait`` seconds (0–20; the
        queue's ``ReceiveMessageWaitTimeSeconds`` if ``None``) for the first, with the GIL
        released while it waits."""
        got = self._raw.receive(
            _count(max_messages, "max_messages"),
            _ms(visibility_timeout, "visibility_timeout"),
            _ms(wait, "wait"),
            attempt_id,
        )
        return [Message._of(d, self) for d in got]

    def messages(self, *, wait: float = 20, batch: int = 10, visibility_timeout: Optional[float] = None) -> Iterator[Message]:
        """Every message, as it comes: long polls of ``wait`` seconds, until the handle is
        closed (from another thread, say: the iteration then ends). Each message is in flight
        until deleted."""
        while not self.closed:
            try:
                got = self.receive(batch, wait=wait, visibility_timeout=visibility_timeout)
            except ValueError:
                if self.closed:
                    return
                raise
            yield from got

    def delete_batch(self, messages: Iterable[Union[Message, str]]) -> List[Optional[Exception]]:
        """Deletes up to 10 received messages (or receipt handles) in one request; returns, in
        order, ``None`` for each deleted or the entry's ``shmfifo.Error``."""
        from ._errors import Error

        handles = [_handle_of(i, m) for i, m in enumerate(_entries(messages))]
        out = self._raw.delete_batch([(str(i), h) for i, h in enumerate(handles)])
        return [None if f is None else Error(f[0], f[1], f[3]) for _id, f in out]

    def change_visibility_batch(
        self, messages: Iterable[Tuple[Union[Message, str], float]]
    ) -> List[Optional[Exception]]:
        """Changes the visibility of up to 10 received messages in one request, each
        ``(message or receipt handle, seconds)``; returns, in order, ``None`` or the entry's
        ``shmfifo.Error``."""
        from ._errors import Error

        entries = []
        for i, e in enumerate(_entries(messages)):
            if not isinstance(e, (tuple, list)) or len(e) != 2:
                raise TypeError(f"entry {i}: (message or receipt handle, seconds), not {e!r}")
            entries.append((str(i), _handle_of(i, e[0]), _ms(e[1], "seconds")))
        out = self._raw.change_visibility_batch(entries)
        return [None if f is None else Error(f[0], f[1], f[3]) for _id, f in out]

    def delete(self, message: Union[Message, str]) -> None:
        """Deletes a received message (or a receipt handle)."""
        self._raw.delete(message.receipt_handle if isinstance(message, Message) else message)

    def change_visibility(self, message: Union[Message, str], seconds: float) -> None:
        """Hides a received message for ``seconds`` more from now."""
        handle = message.receipt_handle if isinstance(message, Message) else message
        self._raw.change_visibility(handle, _ms(seconds, "seconds"))

    def advance_clock(self, seconds: float) -> None:
        """Moves a test clock forward (a queue created with ``test_clock=True``), for every
        process: visibility timeouts, delays, retention and dedup windows that end within it
        end now."""
        self._raw.advance_clock(_ms(seconds, "seconds"))

    def purge(self) -> int:
        """Removes every message and every remembered dedup id; returns how many messages."""
        return self._raw.purge()

    def attributes(self) -> Dict[str, str]:
        """The queue's attributes, with SQS's names and string values."""
        return dict(self._raw.attributes())

    def set_attribute(self, name: str, value: str) -> None:
        """Changes one attribute (SQS's name), live for every process."""
        self._raw.set_attribute(name, value)

    def set_attributes(self, attributes: Mapping[str, str]) -> None:
        """Changes several attributes at once, as SQS's SetQueueAttributes: all are checked
        before any applies, so one bad name or value changes none."""
        self._raw.set_attributes([(k, v) for k, v in attributes.items()])

    def counters(self) -> Dict[str, int]:
        """Lifetime counters (sent, received, deleted …) over every process."""
        return dict(self._raw.counters())

    def peek(self, max_messages: int = 10) -> List[Message]:
        """What a receive would return now, changing nothing (no receipt handles)."""
        return [Message._of(dict(d, receipt_handle=""), None) for d in self._raw.peek(_count(max_messages, "max_messages"))]

    def redrive(self, destination: Optional[str] = None, *, max_per_second: Optional[int] = None, limit: Optional[int] = None) -> "Redriven":
        """On a dead-letter queue: moves its messages back to their source queues (or to
        ``destination``); returns how many moved, an ``int`` whose ``skipped`` says how many
        it left here (a source queue gone or refusing: they stay, visible again) and whose
        ``cancelled`` whether it was stopped before the end."""
        moved, skipped, cancelled = self._raw.redrive(destination, max_per_second, limit)
        return Redriven(moved, skipped, cancelled)

    def __reduce__(self):
        # Pickled to hand it to another process (multiprocessing's spawn), it failed naming
        # the native class; a handle is one process's participant.
        raise TypeError(
            "a shmfifo.Queue is one process's handle and cannot be pickled: pass its path "
            "and open it in the other process (shmfifo.Queue.open(path))"
        )

    def __repr__(self) -> str:
        try:
            return f"<shmfifo.Queue {self.path!r}>"
        except ValueError:
            return "<shmfifo.Queue (closed)>"
