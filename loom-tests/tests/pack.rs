//! A pack (layout 22) published to a reader: the writer fills a claimed slot's members and
//! directory (`pack::write`, plain stores and copies), then publishes the slot's `lens` word
//! with a Release store; a reader that loads the word with Acquire and finds the pack opens it
//! (`pack::open`) and reads every member's directory words as written, through the heap
//! arena's side table of directories (`HeapArena::with_packs`), which is how loom models
//! packs (its atomics are not words in a payload). The members' bytes are plain memory,
//! which loom does not track: compared, but no ordering bug could show in them.
#![cfg(shmfifo_loom)]

use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};

use shmfifo::protocol::pack;
use shmfifo_loom_tests::*;

#[test]
fn a_published_pack_reads_as_written() {
    // Executions in which the reader found the pack (the model must explore some).
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    model(|| {
        let h = Arc::new(HeapArena::with_packs(&Geometry {
            participants: 2,
            max_groups: 1,
            group_slots: 2,
            ready_slots: 2,
            classes: vec![(256, 1)],
            dedup_slots: 0,
            dedup_key_words: shmfifo::layout::DEDUP_KEY_WORDS,
            attempt_slots: 0,
            class_growth: Vec::new(),
            size_limit: 0,
            dedup_growth: 0,
            group_growth: 0,
        }));
        let members: [[&[u8]; 3]; 2] = [[b"one", b"d", b""], [b"two!", b"", b"at"]];
        let (w, r) = (h.clone(), h.clone());
        par(
            move || {
                let a = w.arena();
                // SAFETY: slot 0 is this thread's alone until the store below publishes it.
                let unit = unsafe { pack::write(&a, 0, 3, &members) }.unwrap().unwrap();
                // Release: publishes the member words and bytes written above to the reader's
                // Acquire load (as a send's link CAS publishes a message).
                a.msg(0).unwrap().own.lens.store(unit, Ordering::Release);
            },
            move || {
                let a = r.arena();
                // Acquire: pairs with the writer's Release store.
                let unit = a.msg(0).unwrap().own.lens.load(Ordering::Acquire);
                if unit == 0 {
                    return; // not published yet
                }
                SEEN.fetch_add(1, StdOrdering::Relaxed);
                // SAFETY: the writer is done with the slot (its publication was seen) and
                // nobody copies into it again.
                let p = unsafe { pack::open(&a, 0, unit) }.expect("a published pack opens");
                for (j, m) in members.iter().enumerate() {
                    assert_eq!(
                        p.members[j].vis.load(Ordering::Relaxed),
                        vis::pack(3, vis::published(0))
                    );
                    // SAFETY: as above.
                    let bytes = unsafe { p.bytes(j) }.unwrap();
                    assert_eq!(bytes, [m[0], m[1], m[2]].concat());
                }
            },
        );
    });
    assert!(
        SEEN.load(StdOrdering::Relaxed) > 0,
        "no execution published first"
    );
}
