#!/usr/bin/env python3
"""shmfifo from Python through ctypes (no compiled extension): a producer.

Usage: send.py QUEUE N [GROUPS]

Sends N messages round-robin over GROUPS groups (default 4) named py-g{j}, body
"py-g{j}:{k}", with the body as dedup id, and prints "sent N, duplicates D" (D: sends the
queue reported as duplicates of earlier ones). The library is found through $SHMFIFO_LIB (a path
to libshmfifo.so), else the loader's search path.
"""
import ctypes
import os
import sys


class Str(ctypes.Structure):
    _fields_ = [("data", ctypes.c_char_p), ("len", ctypes.c_size_t)]


class Attribute(ctypes.Structure):
    _fields_ = [("name", Str), ("data_type", Str),
                ("value", ctypes.c_void_p), ("value_len", ctypes.c_size_t)]


class SendMessage(ctypes.Structure):
    _fields_ = [("group_id", Str), ("body", Str), ("dedup_id", Str),
                ("attributes", ctypes.POINTER(Attribute)),
                ("attribute_count", ctypes.c_size_t),
                ("delay_seconds", ctypes.c_uint32)]


class SendResult(ctypes.Structure):
    _fields_ = [("message_id", ctypes.c_char * 40),
                ("sequence_number", ctypes.c_char * 40),
                ("sequence_hi", ctypes.c_uint64), ("sequence_lo", ctypes.c_uint64),
                ("duplicate", ctypes.c_uint32)]


def load():
    lib = ctypes.CDLL(os.environ.get("SHMFIFO_LIB", "libshmfifo.so"))
    lib.shmfifo_queue_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.shmfifo_queue_open.restype = ctypes.c_uint32
    lib.shmfifo_queue_close.argtypes = [ctypes.c_void_p]
    lib.shmfifo_queue_close.restype = None
    lib.shmfifo_send.argtypes = [ctypes.c_void_p, ctypes.POINTER(SendMessage),
                                 ctypes.POINTER(SendResult)]
    lib.shmfifo_send.restype = ctypes.c_uint32
    lib.shmfifo_result_name.argtypes = [ctypes.c_uint32]
    lib.shmfifo_result_name.restype = ctypes.c_char_p
    lib.shmfifo_last_error_message.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.shmfifo_last_error_message.restype = ctypes.c_size_t
    return lib


def check(lib, what, code):
    if code != 0:
        buf = ctypes.create_string_buffer(512)
        lib.shmfifo_last_error_message(buf, len(buf))
        raise RuntimeError("%s: %s: %s" % (what, lib.shmfifo_result_name(code).decode(),
                                           buf.value.decode()))


def s(b):
    return Str(b, len(b))


def main():
    name, n = sys.argv[1].encode(), int(sys.argv[2])
    groups = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    lib = load()
    q = ctypes.c_void_p()
    check(lib, "open", lib.shmfifo_queue_open(name, ctypes.byref(q)))
    counts = [0] * groups
    duplicates = 0
    try:
        for i in range(n):
            j = i % groups
            group = b"py-g%d" % j
            body = b"%s:%d" % (group, counts[j])
            m = SendMessage(s(group), s(body), s(body), None, 0)
            r = SendResult()
            check(lib, "send", lib.shmfifo_send(q, ctypes.byref(m), ctypes.byref(r)))
            assert len(r.message_id) == 36
            duplicates += r.duplicate
            counts[j] += 1
    finally:
        lib.shmfifo_queue_close(q)
    print("sent %d, duplicates %d" % (n, duplicates))


if __name__ == "__main__":
    main()
