"""The Pythonic layer: Queue, Message, SendResult (rule ids from SQS-FIFO.md)."""

import os
import re
import signal
import threading
import time

import pytest

import shmfifo


@pytest.fixture
def q(qdir):
    with shmfifo.Queue.create(os.path.join(qdir, "jobs.fifo"), visibility_timeout=30) as q:
        yield q


def test_send_receive_delete_in_group_order(q):
    for i in range(3):
        r = q.send("g", f"m{i}", dedup_id=str(i))
        assert isinstance(r, shmfifo.SendResult) and not r.duplicate
    # D1: a duplicate is accepted, not delivered, and says so.
    dup = q.send("g", "m0 again", dedup_id="0")
    assert dup.duplicate
    got = q.receive(10)
    # R3: one group, so one receive returns its messages in order.
    assert [m.body for m in got] == ["m0", "m1", "m2"]
    assert got[0].message_id == dup.message_id
    for m in got:
        assert m.receive_count == 1 and m.group_id == "g"
        m.delete()
    assert q.receive(10, wait=0) == []
    assert q.attributes()["ApproximateNumberOfMessages"] == "0"


def test_attributes_of_every_type(q):
    q.send("g", "x", dedup_id="1", attributes={"s": "text", "n": 42, "f": 1.5, "b": b"\x00\xff", "c": ("Number.price", "9.99")})
    [m] = q.receive()
    assert m.attributes == {
        "s": ("String", "text"),
        "n": ("Number", "42"),
        "f": ("Number", "1.5"),
        "b": ("Binary", b"\x00\xff"),
        "c": ("Number.price", "9.99"),
    }
    with pytest.raises(TypeError):
        q.send("g", "y", dedup_id="2", attributes={"bad": object()})


def test_errors_are_shmfifo_errors_with_sqs_codes(q):
    with pytest.raises(shmfifo.Error) as e:
        q.send("g", "no dedup id")
    assert e.value.code == "InvalidParameterValue"
    with pytest.raises(shmfifo.Error) as e:
        q.send("bad group id", "x", dedup_id="1")  # S2: a space
    assert e.value.code == "InvalidParameterValue"
    with pytest.raises(shmfifo.Error) as e:
        q.delete("not a handle")
    assert e.value.code == "ReceiptHandleIsInvalid"
    with pytest.raises(shmfifo.Error) as e:
        shmfifo.Queue.open("/dev/shm/no-such-shmfifo-queue.fifo")
    assert e.value.code == "AWS.SimpleQueueService.NonExistentQueue"
    assert "NonExistentQueue" in str(e.value)


def test_visibility_timeout_returns_a_message(q):
    q.send("g", "retry me", dedup_id="1")
    [m] = q.receive(visibility_timeout=0.2)
    assert q.receive(wait=0) == []  # R3: in flight
    # R4: back after its visibility timeout; the long poll wakes for it.
    start = time.monotonic()
    [again] = q.receive(wait=5)
    assert again.body == "retry me" and again.receive_count == 2
    assert time.monotonic() - start < 4
    again.change_visibility(0)
    [third] = q.receive()
    assert third.receive_count == 3


def test_batch_peek_purge_counters(q):
    results = q.send_batch([("a", "1", "1"), ("a", "2", "2"), {"group_id": "b", "body": "3", "dedup_id": "3"}, ("b", "", "4")])
    assert [type(r).__name__ for r in results] == ["SendResult", "SendResult", "SendResult", "Error"]
    assert results[3].code == "InvalidParameterValue"  # S6: an empty body
    assert results[3].kind == "InvalidParameterValue"  # the Rust library's ErrorCode, as a raised error's
    peeked = q.peek(10)
    assert [m.body for m in peeked] == ["1", "2", "3"] or [m.body for m in peeked] == ["3", "1", "2"]
    assert q.counters()["sent"] == 3
    assert q.purge() == 3
    assert q.receive(10) == []


def test_batch_entries_of_another_shape_are_refused_naming_them(q):
    # A plain string was unpacked as a tuple ("hello": body 'e' to group 'h', dedup id 'l'),
    # a fourth element (the attributes) was dropped, a dict without body raised KeyError.
    for bad, says in [
        (["hello"], "entry 0"),
        ([("g",)], "1 values"),
        ([("g", "b", "d", None, "x")], "5 values"),
        ([{"group_id": "g"}], "needs group_id and body"),
        ([{"group_id": "g", "body": "b", "dedup": "1"}], "unknown keys ['dedup']"),
        ([("g", "b", "1"), 42], "entry 1"),
    ]:
        with pytest.raises(TypeError, match=re.escape(says)):
            q.send_batch(bad)
    assert q.peek(10) == []  # nothing sent
    [r] = q.send_batch([("g", "b", "1", {"k": "v"})])
    assert isinstance(r, shmfifo.SendResult)
    [m] = q.receive()
    assert m.attributes == {"k": ("String", "v")}


def test_a_long_poll_stops_at_ctrl_c_and_loses_nothing(q):
    # A wait of 10 s ignored SIGINT to its end, and a message that came meanwhile was taken
    # and then lost to the KeyboardInterrupt until its visibility timeout.
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        q.receive(wait=10)
    assert time.monotonic() - start < 5, "the wait went on past Ctrl-C"
    timer.join()
    q.send("g", "after", dedup_id="1")
    assert [m.body for m in q.receive(wait=0)] == ["after"]


def test_a_long_poll_is_one_receive_and_keeps_sqs_bounds(q):
    # A long poll that got nothing counts once in NumberOfEmptyReceives, as SQS counts it,
    # however many times it looked at the signals (a first version waited in slices, each
    # counted); its wait is bounded as SQS's (0-20 s).
    before = q.counters()["empty_receives"]
    assert q.receive(wait=0.5) == []
    assert q.counters()["empty_receives"] == before + 1
    with pytest.raises(shmfifo.Error) as e:
        q.receive(wait=21)
    assert e.value.code == "InvalidParameterValue"


def test_closing_a_handle_ends_another_threads_wait(q):
    got = []
    t = threading.Thread(target=lambda: got.append(q.receive(wait=10)))
    start = time.monotonic()
    t.start()
    time.sleep(0.3)
    q.close()
    t.join(timeout=20)
    assert got == [[]]
    assert time.monotonic() - start < 5, "the wait went on past the close"


def test_messages_ends_when_another_thread_closes_the_handle(q):
    # A consumer thread's `for m in q.messages()` raised ValueError at the close; it ends.
    seen = []

    def consume():
        for m in q.messages(wait=20):
            seen.append(m.body)
            m.delete()

    t = threading.Thread(target=consume)
    t.start()
    q.send("g", "one", dedup_id="1")
    time.sleep(0.5)
    assert not q.closed
    q.close()
    t.join(timeout=10)
    assert not t.is_alive() and seen == ["one"] and q.closed


def test_batch_deletes_and_visibility_changes(q):
    for i in range(3):
        q.send(f"g{i}", f"m{i}", dedup_id=str(i))
    got = q.receive(10)
    assert len(got) == 3
    r = q.change_visibility_batch([(got[0], 0), (got[1].receipt_handle, 60), ("not-a-handle", 1)])
    assert r[0] is None and r[1] is None and isinstance(r[2], shmfifo.Error)
    [again] = q.receive(10)  # the one made visible
    assert again.body == "m0"
    # A string is not a batch; an entry of another shape is named.
    with pytest.raises(TypeError, match="not a string"):
        q.delete_batch("abc")
    with pytest.raises(TypeError, match="entry 1"):
        q.change_visibility_batch([(got[1], 60), got[2]])
    with pytest.raises(TypeError, match="entry 0"):
        q.delete_batch([42])
    r = q.delete_batch([again, got[1], got[2].receipt_handle])
    assert r == [None, None, None]
    assert q.attributes()["ApproximateNumberOfMessages"] == "0"


def test_a_queue_is_not_pickled_and_says_how_to_share_it(q):
    import pickle

    with pytest.raises(TypeError, match=re.escape("shmfifo.Queue.open(path)")):
        pickle.dumps(q)


def test_a_received_message_pickles_as_its_data(q):
    # Handed to a process pool, a message failed naming a Queue (its handle went along):
    # it pickles as its data and receipt handle, deleted by a Queue open where it lands.
    import pickle

    q.send("g", "work", dedup_id="1")
    [m] = q.receive()
    copy = pickle.loads(pickle.dumps(m))
    assert (copy.body, copy.receipt_handle, copy.group_id) == (m.body, m.receipt_handle, m.group_id)
    with pytest.raises(ValueError, match="queue.delete"):
        copy.delete()
    q.delete(copy.receipt_handle)
    assert q.attributes()["ApproximateNumberOfMessagesNotVisible"] == "0"
    # A copy within the process keeps its queue.
    import copy as copying

    q.send("g", "again", dedup_id="2")
    [m] = q.receive()
    copying.deepcopy(m).change_visibility(0)
    assert copying.copy(m)._received() is q
    [again] = q.receive(wait=0)
    assert again.body == "again" and again.receive_count == 2


def test_closed_handle(qdir):
    q = shmfifo.Queue.create(os.path.join(qdir, "c.fifo"))
    q.close()
    with pytest.raises(ValueError):
        q.send("g", "x", dedup_id="1")
    assert "closed" in repr(q)


def test_a_waiting_receive_releases_the_gil(q):
    # While one thread waits in receive, other Python threads run.
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    start = time.monotonic()
    assert q.receive(wait=0.5) == []
    waited = time.monotonic() - start
    done.set()
    t.join()
    assert waited >= 0.49  # the wait is measured in whole ms of the arena clock
    assert len(ticks) > 50, f"other threads ran {len(ticks)} times in {waited:.2f} s"


def test_messages_iterates_across_threads(q):
    def produce():
        for i in range(20):
            q.send("g", f"m{i}", dedup_id=str(i))
            time.sleep(0.002)

    threading.Thread(target=produce).start()
    got = []
    for m in q.messages(wait=2):
        got.append(m.body)
        m.delete()
        if len(got) == 20:
            break
    assert got == [f"m{i}" for i in range(20)]


def test_a_test_clock_runs_timeouts_at_once(qdir):
    with shmfifo.Queue.create(os.path.join(qdir, "clock.fifo"), test_clock=True) as q:
        q.send("g", "job", dedup_id="1")
        [m] = q.receive(visibility_timeout=12 * 3600)
        assert q.receive() == []
        q.advance_clock(12 * 3600)  # R4: twelve hours, at once
        [again] = q.receive()
        assert again.message_id == m.message_id and again.receive_count == 2
        again.delete()
        # D1: the dedup interval ends on the queue's clock too (twelve hours have passed
        # since "1" was sent: it is new again).
        assert not q.send("g", "job", dedup_id="1").duplicate
        assert q.send("g", "job", dedup_id="1").duplicate
        q.advance_clock(299)
        assert q.send("g", "job", dedup_id="1").duplicate
        q.advance_clock(1)
        assert not q.send("g", "job", dedup_id="1").duplicate
    with shmfifo.Queue.create(os.path.join(qdir, "real.fifo")) as real:
        with pytest.raises(shmfifo.Error) as e:
            real.advance_clock(1)
        assert e.value.code == "InvalidAttributeValue"


def test_a_binary_queue_moves_any_bytes(qdir):
    """the binary body mode: bytes in, the same bytes out; a text queue refuses bytes
    that are not text (S7) and takes bytes that are."""
    frame = bytes(range(256))
    with shmfifo.Queue.create(
        os.path.join(qdir, "frames.fifo"), body_mode="binary", deduplication="off"
    ) as q:
        q.send("camera", frame)
        q.send("camera", "text too")
        got = q.receive(max_messages=10)
        # A binary queue hands out bytes, whatever was sent.
        assert [m.body for m in got] == [frame, b"text too"]
    with shmfifo.Queue.create(os.path.join(qdir, "text.fifo"), deduplication="off") as t:
        with pytest.raises(shmfifo.Error) as e:
            t.send("g", b"\xff\xfe")
        assert e.value.code == "InvalidMessageContents"
        t.send("g", b"plain")
        [m] = t.receive()
        assert m.body == "plain"
    with pytest.raises(ValueError):
        shmfifo.Queue.create(os.path.join(qdir, "bad.fifo"), body_mode="hex")


def test_a_queue_file_truncated_under_the_interpreter_is_an_error_not_a_crash(qdir):
    # Anyone who may write a queue's file can cut it. The library's SIGBUS guard makes the
    # next call of that queue raise Truncated; without it the interpreter died of SIGBUS.
    path = os.path.join(qdir, "cut.fifo")
    with shmfifo.Queue.create(path) as q:
        q.send("g", "x", dedup_id="1")
        os.truncate(path, 4096)
        with pytest.raises(shmfifo.Error) as e:
            q.send("g", "y", dedup_id="2")
        assert e.value.kind == "Truncated" and e.value.code == "shmfifo.Truncated"
        with pytest.raises(shmfifo.Error) as e:
            q.receive(10, wait=0)
        assert e.value.kind == "Truncated"
        # Its figures too (they read as zeros, not the queue's).
        for call in (q.attributes, q.counters):
            with pytest.raises(shmfifo.Error) as e:
                call()
            assert e.value.kind == "Truncated"


def test_a_wrong_argument_names_itself(q, qdir):
    with pytest.raises(TypeError, match="body"):
        q.send("g", 42, dedup_id="1")
    with pytest.raises(ValueError, match="max_messages"):
        q.receive(-1)
    with pytest.raises(TypeError, match="wait"):
        q.receive(wait="5")
    with pytest.raises(ValueError, match="visibility_timeout"):
        q.receive(visibility_timeout=-1)
    with pytest.raises(ValueError, match="max_messages"):
        shmfifo.Queue.create(os.path.join(qdir, "neg.fifo"), max_messages=-1)
    with pytest.raises(TypeError, match="Queue.create"):
        shmfifo.Queue(os.path.join(qdir, "jobs.fifo"))
    # A peeked message has no receipt handle: said so, not an assert.
    q.send("g", "x", dedup_id="p")
    (peeked,) = q.peek()
    with pytest.raises(ValueError, match="peek"):
        peeked.delete()
    # SQS's dict for a redrive policy, as well as the tuple.
    dlq = shmfifo.Queue.create(os.path.join(qdir, "dlq.fifo"))
    p = shmfifo.Queue.create(os.path.join(qdir, "p.fifo"), redrive_policy={"deadLetterTargetArn": dlq.path, "maxReceiveCount": 3})
    assert '"maxReceiveCount":3' in p.attributes()["RedrivePolicy"].replace(" ", "")


def test_redrive_says_what_it_moved_and_what_it_left(qdir):
    # X5: a message whose source queue is gone stays in the dead-letter queue; the count of
    # those was dropped (redrive returned 0, saying nothing).
    dlq = shmfifo.Queue.create(os.path.join(qdir, "dlq.fifo"))
    sources = [shmfifo.Queue.create(os.path.join(qdir, f"{n}.fifo"), redrive_policy=(dlq.path, 1)) for n in ("a", "b")]
    for src in sources:
        src.send("g", "poison", dedup_id="1")
        assert len(src.receive(visibility_timeout=0)) == 1
        assert src.receive(visibility_timeout=0) == []  # moved by its second receive
    assert dlq.attributes()["ApproximateNumberOfMessages"] == "2"
    gone = sources[1].path
    sources[1].close()
    shmfifo.Queue.unlink(gone)
    r = dlq.redrive()
    assert (r, r.skipped, r.cancelled) == (1, 1, False)
    assert r + 0 == 1 and isinstance(r, int) and "skipped=1" in repr(r)
    assert [m.body for m in sources[0].receive(10)] == ["poison"]
    # And Queue.create names its own keyword (it named the SQS attribute), and takes SQS's
    # high-throughput mode.
    with pytest.raises(ValueError, match="visibility_timeout"):
        shmfifo.Queue.create(os.path.join(qdir, "half.fifo"), visibility_timeout=1.5)
    ht = shmfifo.Queue.create(os.path.join(qdir, "ht.fifo"), deduplication_scope="messageGroup", fifo_throughput_limit="perMessageGroupId")
    assert ht.attributes()["FifoThroughputLimit"] == "perMessageGroupId"


def test_set_attributes_is_all_or_nothing(q):
    # Q5 (our choice for a request of several): one bad value changes nothing.
    with pytest.raises(shmfifo.Error) as e:
        q.set_attributes({"DelaySeconds": "7", "VisibilityTimeout": "-5"})
    assert e.value.code == "InvalidAttributeValue"
    assert q.attributes()["DelaySeconds"] == "0"
    q.set_attributes({"DelaySeconds": "7", "VisibilityTimeout": "45"})
    assert (q.attributes()["DelaySeconds"], q.attributes()["VisibilityTimeout"]) == ("7", "45")


def test_a_forked_child_opens_its_own_handle(q):
    # The parent's handle refuses the child (it is the parent's participant); a handle the
    # child opens works; the child's end releases nothing of the parent's.
    path = q.path
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                q.send("g", "from the parent's handle", dedup_id="c0")
            except ValueError as e:
                if "fork" in str(e):
                    with shmfifo.Queue.open(path) as mine:
                        mine.send("g", "from the child", dedup_id="c1")
                    q.close()
                    code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    q.send("g", "from the parent", dedup_id="p1")
    got = q.receive(10, wait=0)
    assert [m.body for m in got] == ["from the child", "from the parent"]
