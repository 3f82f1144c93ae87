//! Body of the `c_abi` fuzz target (the C ABI checks every count and length
//! before it reads). The C entry points are called as a C program would, with arbitrary
//! counts and lengths, on a small queue under `/dev/shm`.
//!
//! Every buffer handed over is a heap allocation of exactly the bytes it holds, so that
//! AddressSanitizer reports any read past it. A count or length is either honest (at most
//! what the buffer holds) or past its SQS limit (limit + 1 up to `usize::MAX`): the library
//! must then return a validation code without reading. A length between the buffer's size
//! and its limit would be the caller's own bug (the contract says the memory is there), so it
//! is never passed. Oracle: no ASan report, no crash, no `SHMFIFO_PANIC`.

use core::ffi::c_char;
use std::ffi::CString;

use crate::ffi::*;

/// SQS limits the library checks (the C ABI's documented bounds).
const MAX_ID: usize = 128;
const MAX_ENTRY_ID: usize = 80;
const MAX_ATTR_NAME: usize = 256;
const MAX_BATCH: usize = 10;
const MAX_ATTRS: usize = 10;
/// This queue's maximum message size.
const MAX_SIZE: usize = 1024;

struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
    /// A claimed length for a buffer of `real` bytes with limit `limit`: honest, or past
    /// the limit (never in between).
    fn claim(&mut self, real: usize, limit: usize) -> usize {
        match self.byte() % 8 {
            0 => limit + 1,
            1 => limit + 1 + usize::from(self.byte()),
            2 => 1 << 40,
            3 => usize::MAX,
            4 => real / 2,
            _ => real,
        }
    }
}

/// Bytes kept alive for the duration of one call: each `Box<[u8]>` is exactly its length.
#[derive(Default)]
struct Arena {
    bufs: Vec<Box<[u8]>>,
}

impl Arena {
    fn keep(&mut self, b: Vec<u8>) -> *const u8 {
        let b = b.into_boxed_slice();
        let p = b.as_ptr();
        self.bufs.push(b);
        p
    }
    /// A string view of `n` bytes (`pick` chooses among text shapes), its length claimed
    /// honestly or past `limit`.
    fn text(&mut self, inp: &mut Input<'_>, limit: usize) -> shmfifo_str {
        let n = match inp.byte() % 4 {
            0 => 0,
            1 => usize::from(inp.byte() % 8) + 1,
            2 => limit.min(usize::from(inp.byte()) + 1),
            _ => limit,
        };
        let bytes: Vec<u8> = inp.bytes(n).iter().map(|b| b'!' + b % 94).collect();
        let len = inp.claim(n, limit);
        let len = if len <= limit { len.min(n) } else { len };
        shmfifo_str {
            data: self.keep(bytes).cast::<c_char>(),
            len,
        }
    }
    fn message(&mut self, inp: &mut Input<'_>) -> shmfifo_send_message {
        let group_id = self.text(inp, MAX_ID);
        let body = self.text(inp, MAX_SIZE);
        let dedup_id = self.text(inp, MAX_ID);
        let real = usize::from(inp.byte() % 4);
        let attrs: Vec<shmfifo_attribute> = (0..real)
            .map(|_| {
                let name = self.text(inp, MAX_ATTR_NAME);
                let data_type = self.text(inp, MAX_ATTR_NAME);
                let value = self.text(inp, MAX_SIZE);
                shmfifo_attribute {
                    name,
                    data_type,
                    value: value.data.cast(),
                    value_len: value.len,
                }
            })
            .collect();
        let attribute_count = inp.claim(real, MAX_ATTRS);
        let attribute_count = if attribute_count <= MAX_ATTRS {
            attribute_count.min(real)
        } else {
            attribute_count
        };
        let attributes = attrs.as_ptr();
        // Kept alive (exact size) by leaking into the arena as bytes is not possible for a
        // typed array: keep the Vec in a side list instead.
        ATTRS.with(|a| a.borrow_mut().push(attrs));
        shmfifo_send_message {
            group_id,
            body,
            dedup_id,
            attributes,
            attribute_count,
            // S5: mostly none, sometimes a delay the queue must refuse.
            delay_seconds: if inp.byte() < 16 {
                u32::from(inp.byte())
            } else {
                0
            },
        }
    }
    /// A NUL-terminated receipt: a received one, or arbitrary text (also long).
    fn receipt(&mut self, inp: &mut Input<'_>, received: &[CString]) -> *const c_char {
        let pick = inp.byte();
        if pick < 128 && !received.is_empty() {
            return received[usize::from(pick) % received.len()].as_ptr();
        }
        let n = match inp.byte() % 3 {
            0 => 41,
            1 => usize::from(inp.byte()),
            _ => 5000,
        };
        let mut b: Vec<u8> = inp.bytes(n).iter().map(|b| b'0' + b % 75).collect();
        b.push(0);
        self.keep(b).cast()
    }
}

thread_local! {
    static ATTRS: std::cell::RefCell<Vec<Vec<shmfifo_attribute>>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn ok(what: &str, r: shmfifo_result) {
    assert_ne!(r, SHMFIFO_PANIC, "{what} panicked inside the library");
}

/// A directory under `/dev/shm` for one input's queue, removed (with it) on drop.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs one input (see the module docs).
pub fn c_abi(data: &[u8]) {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = std::path::PathBuf::from(format!(
        "/dev/shm/shmfifo-fuzz-cabi-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).expect("create a scratch directory under /dev/shm");
    let scratch = Scratch(dir);
    let path = CString::new(scratch.0.join("queue").to_string_lossy().into_owned()).unwrap();
    let mut cfg = shmfifo_config_default();
    cfg.max_messages = 16;
    cfg.max_groups = 8;
    cfg.maximum_message_size = MAX_SIZE as u32;
    cfg.dedup_entries = 32;
    let mut q: *mut shmfifo_queue = core::ptr::null_mut();
    // SAFETY: a NUL-terminated path, a valid config, a writable out-pointer.
    let r = unsafe { shmfifo_queue_create(path.as_ptr(), &cfg, &mut q) };
    assert_eq!(r, SHMFIFO_OK, "create the queue");
    let buf = shmfifo_receive_buffer_new();
    let mut inp = Input { data, pos: 0 };
    let mut received: Vec<CString> = Vec::new();
    for _ in 0..64 {
        if inp.is_empty() {
            break;
        }
        let mut mem = Arena::default();
        ATTRS.with(|a| a.borrow_mut().clear());
        match inp.byte() % 12 {
            0 => {
                let m = mem.message(&mut inp);
                let mut out = core::mem::MaybeUninit::<shmfifo_send_result>::uninit();
                // SAFETY: `m`'s buffers hold what their honest lengths say; dishonest ones are
                // past their limits (the library checks them before reading).
                ok("send", unsafe { shmfifo_send(q, &m, out.as_mut_ptr()) });
            }
            1 => {
                let real = usize::from(inp.byte() % 4) + 1;
                let entries: Vec<shmfifo_batch_entry> = (0..real)
                    .map(|_| shmfifo_batch_entry {
                        id: mem.text(&mut inp, MAX_ENTRY_ID),
                        message: mem.message(&mut inp),
                    })
                    .collect();
                let n = inp.claim(real, MAX_BATCH);
                let n = if n <= MAX_BATCH { n.min(real) } else { n };
                let mut results: Vec<shmfifo_batch_result> = Vec::with_capacity(real);
                // SAFETY: `entries` holds `real` entries and `results` room for `real`; `n` is
                // at most `real` or past the limit of 10.
                ok("send_batch", unsafe {
                    shmfifo_send_batch(q, entries.as_ptr(), n, results.as_mut_ptr())
                });
            }
            2 => {
                let mut o = shmfifo_receive_options_default();
                o.max_messages = u32::from(inp.byte() % 12);
                o.visibility_timeout_ms = i64::from(inp.byte()) - 1;
                o.wait_time_ms = 0;
                o.attempt_id = mem.text(&mut inp, MAX_ID);
                let cap = usize::from(inp.byte() % 12);
                let mut out: Vec<shmfifo_message> = Vec::with_capacity(cap);
                let mut count = 0usize;
                // SAFETY: `out` has room for `cap` messages; `buf` is live.
                let r = unsafe { shmfifo_receive(q, &o, buf, out.as_mut_ptr(), cap, &mut count) };
                ok("receive", r);
                if r == SHMFIFO_OK {
                    // SAFETY: the library wrote `count` (≤ cap) messages.
                    unsafe { out.set_len(count.min(cap)) };
                    for m in &out {
                        // A NUL-terminated array inside the message.
                        let h: Vec<u8> = m
                            .receipt_handle
                            .iter()
                            .take_while(|&&c| c != 0)
                            .map(|&c| c as u8)
                            .collect();
                        if let Ok(c) = CString::new(h) {
                            received.push(c);
                        }
                    }
                }
            }
            3 => {
                let h = mem.receipt(&mut inp, &received);
                // SAFETY: NUL-terminated.
                ok("delete", unsafe { shmfifo_delete(q, h) });
            }
            4 => {
                let h = mem.receipt(&mut inp, &received);
                let t = u64::from(inp.byte()) * 1000;
                // SAFETY: NUL-terminated.
                ok("change_visibility", unsafe {
                    shmfifo_change_visibility(q, h, t)
                });
            }
            5 | 6 => {
                let real = usize::from(inp.byte() % 4) + 1;
                let entries: Vec<shmfifo_handle_entry> = (0..real)
                    .map(|_| {
                        let id = mem.text(&mut inp, MAX_ENTRY_ID);
                        let r = mem.receipt(&mut inp, &received);
                        // SAFETY: NUL-terminated, so strlen stays inside it.
                        let len = unsafe { std::ffi::CStr::from_ptr(r) }.to_bytes().len();
                        let claimed = inp.claim(len, 4096);
                        shmfifo_handle_entry {
                            id,
                            receipt: shmfifo_str {
                                data: r,
                                len: if claimed <= 4096 {
                                    claimed.min(len)
                                } else {
                                    claimed
                                },
                            },
                            timeout_ms: u64::from(inp.byte()),
                        }
                    })
                    .collect();
                let n = inp.claim(real, MAX_BATCH);
                let n = if n <= MAX_BATCH { n.min(real) } else { n };
                let mut codes: Vec<shmfifo_result> = vec![0; real];
                // SAFETY: `entries` and `codes` hold `real` entries; `n` ≤ real or > 10.
                let r = unsafe {
                    if inp.byte() & 1 == 0 {
                        shmfifo_delete_batch(q, entries.as_ptr(), n, codes.as_mut_ptr())
                    } else {
                        shmfifo_change_visibility_batch(q, entries.as_ptr(), n, codes.as_mut_ptr())
                    }
                };
                ok("handle batch", r);
            }
            7 => {
                let name = mem.text(&mut inp, MAX_ATTR_NAME);
                let value = mem.text(&mut inp, 4096);
                // SAFETY: views honest or past their limits.
                ok("set_attribute", unsafe {
                    shmfifo_queue_set_attribute(q, name, value)
                });
            }
            9 => {
                // A loan: a dishonest group view or length, a fill, a truncation,
                // then a send with a dishonest dedup id and attribute count, or a release.
                let group = mem.text(&mut inp, MAX_ID);
                let len = match inp.byte() % 4 {
                    0 => 0,
                    1 => MAX_SIZE + 1,
                    2 => usize::MAX,
                    _ => usize::from(inp.byte()) * 4 + 1,
                };
                let mut l: *mut shmfifo_loan = core::ptr::null_mut();
                // SAFETY: a view honest or past its limit; a writable out-pointer.
                let r = unsafe { shmfifo_loan_new(q, group, len, &mut l) };
                ok("loan_new", r);
                if r == SHMFIFO_OK {
                    // SAFETY: `l` is a live loan of `shmfifo_loan_len(l)` bytes.
                    unsafe {
                        let n = shmfifo_loan_len(l);
                        let d = shmfifo_loan_data(l);
                        for k in 0..n {
                            *d.add(k) = b'!' + inp.byte() % 94;
                        }
                        ok(
                            "loan_truncate",
                            shmfifo_loan_truncate(l, usize::from(inp.byte())),
                        );
                    }
                    if inp.byte() & 1 == 0 {
                        let dedup = mem.text(&mut inp, MAX_ID);
                        let count = inp.claim(0, MAX_ATTRS);
                        let mut out = core::mem::MaybeUninit::<shmfifo_send_result>::uninit();
                        // SAFETY: `l` live; views honest or past their limits; a NULL
                        // attribute array with a count of 0 or past the limit.
                        let r = unsafe {
                            shmfifo_loan_send(
                                &mut l,
                                dedup,
                                core::ptr::null(),
                                count,
                                out.as_mut_ptr(),
                            )
                        };
                        ok("loan_send", r);
                    }
                    // SAFETY: NULL (sent) or a live loan, not used afterwards.
                    unsafe { shmfifo_loan_release(l) };
                }
            }
            10 => {
                // A borrowing receive, each body read where it lies, then verified.
                let mut o = shmfifo_receive_options_default();
                o.max_messages = u32::from(inp.byte() % 11) + 1;
                o.wait_time_ms = 0;
                o.borrow = 1;
                let mut out: Vec<shmfifo_message> = Vec::with_capacity(10);
                let mut count = 0usize;
                // SAFETY: `out` has room for 10 messages; `buf` is live.
                let r = unsafe { shmfifo_receive(q, &o, buf, out.as_mut_ptr(), 10, &mut count) };
                ok("receive borrowed", r);
                if r == SHMFIFO_OK {
                    // SAFETY: the library wrote `count` (≤ 10) messages.
                    unsafe { out.set_len(count.min(10)) };
                    for m in &out {
                        // SAFETY: a borrowed body views `len` bytes of the live queue's mapping.
                        let body = unsafe {
                            std::slice::from_raw_parts(m.body.data.cast::<u8>(), m.body.len)
                        };
                        std::hint::black_box(body.iter().map(|&b| u64::from(b)).sum::<u64>());
                        // SAFETY: the receipt handle is a NUL-terminated array in `m`.
                        ok("verify", unsafe {
                            shmfifo_verify(q, m.receipt_handle.as_ptr())
                        });
                    }
                }
            }
            11 => {
                // A loaned batch: dishonest member counts, lengths, dedup views and attribute
                // counts; each member filled in place, then sent or released.
                let group = mem.text(&mut inp, MAX_ID);
                // Now and then the queue's deduplication switched to content-based (or back),
                // so that a member without a dedup id gets one generated at the send.
                if inp.byte() < 32 {
                    let on = inp.byte() & 1 == 0;
                    let value: &[u8] = if on { b"true" } else { b"false" };
                    let name = b"ContentBasedDeduplication";
                    // SAFETY: views of static bytes of their lengths.
                    ok("content-based", unsafe {
                        shmfifo_queue_set_attribute(
                            q,
                            shmfifo_str {
                                data: name.as_ptr().cast(),
                                len: name.len(),
                            },
                            shmfifo_str {
                                data: value.as_ptr().cast(),
                                len: value.len(),
                            },
                        )
                    });
                }
                let real = usize::from(inp.byte() % 11);
                let members: Vec<shmfifo_loan_member> = (0..real)
                    .map(|_| shmfifo_loan_member {
                        len: match inp.byte() % 4 {
                            0 => 0,
                            1 => MAX_SIZE + 1,
                            2 => usize::MAX,
                            _ => usize::from(inp.byte()) + 1,
                        },
                        // Sometimes none: the send generates it where the queue's
                        // deduplication is content-based (switched below), or refuses it.
                        dedup_id: if inp.byte() < 64 {
                            shmfifo_str {
                                data: core::ptr::null(),
                                len: 0,
                            }
                        } else {
                            mem.text(&mut inp, MAX_ID)
                        },
                        attributes: core::ptr::null(),
                        attribute_count: inp.claim(0, MAX_ATTRS),
                    })
                    .collect();
                let count = inp.claim(real, 10);
                let count = if count <= 10 { count.min(real) } else { count };
                let mut b: *mut shmfifo_loan_batch = core::ptr::null_mut();
                // SAFETY: `members` holds `real` entries and `count` is at most that or past
                // the limit of 10 (refused before the array is read); views honest or past
                // their limits; a NULL attribute array with a count of 0 or past the limit.
                let r =
                    unsafe { shmfifo_loan_batch_new(q, group, members.as_ptr(), count, &mut b) };
                ok("loan_batch_new", r);
                if r == SHMFIFO_OK {
                    // SAFETY: `b` is a live loaned batch; each member's data holds `len` bytes.
                    unsafe {
                        let n = shmfifo_loan_batch_count(b);
                        for j in 0..n + 1 {
                            let mut len = 0usize;
                            let d = shmfifo_loan_batch_data(b, j, &mut len);
                            for k in 0..len {
                                *d.add(k) = b'!' + inp.byte() % 94;
                            }
                        }
                        if inp.byte() & 1 == 0 {
                            let mut out =
                                vec![core::mem::MaybeUninit::<shmfifo_batch_result>::uninit(); n];
                            ok(
                                "loan_batch_send",
                                shmfifo_loan_batch_send(&mut b, out.as_mut_ptr().cast()),
                            );
                        }
                        // NULL (sent) or a live batch, not used afterwards.
                        shmfifo_loan_batch_release(b);
                    }
                }
            }
            _ => {
                let mut a = core::mem::MaybeUninit::<shmfifo_queue_attributes>::uninit();
                // SAFETY: a writable out-pointer.
                ok("attributes", unsafe {
                    shmfifo_queue_get_attributes(q, a.as_mut_ptr())
                });
                let mut n = 0u64;
                if inp.byte() == 0xFF {
                    // SAFETY: a writable out-pointer.
                    ok("purge", unsafe { shmfifo_purge(q, &mut n) });
                    received.clear();
                }
            }
        }
    }
    // SAFETY: `buf` and `q` are live and used no more.
    unsafe {
        shmfifo_receive_buffer_free(buf);
        shmfifo_queue_close(q);
    }
    drop(scratch);
}
