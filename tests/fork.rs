//! A handle inherited through `fork` is the parent's. A child forked without `exec` shares the
//! liveness lock's open file description and sees the parent's registry slot; if its drop of
//! the handle released them (as a handle's last drop does), the parent would go on as a
//! participant no one sees alive: its slot free for the next opener, its claims taken over as
//! a dead one's. One test alone in this file: the child runs no other test's threads' locks.

mod common;

use std::time::Duration;

use common::*;
use shmfifo::{Queue, ReceiveOptions, SendMessage};

#[test]
fn a_child_that_drops_an_inherited_handle_leaves_the_parent_registered() {
    let name = unique("fork");
    let q = Queue::create(&name, &small()).unwrap();
    let _cleanup = Unlink(name.clone());
    let mine = |q: &Queue| {
        let me: Vec<_> = q
            .inspect(0)
            .unwrap()
            .participants
            .into_iter()
            .filter(|p| p.is_self)
            .collect();
        assert_eq!(me.len(), 1, "{me:?}");
        me[0]
    };
    let before = mine(&q);
    assert!(before.alive);
    // SAFETY: the child only drops the handle (munmap, close, the guard's table) and calls
    // `_exit`, which runs no atexit handler of the parent's.
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            drop(q);
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(0) }
        }
        child => {
            let mut status = 0;
            // SAFETY: waits for our own child, writing into a local.
            let r = unsafe { libc::waitpid(child, &mut status, 0) };
            assert_eq!(r, child);
            assert!(
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                "{status}"
            );
        }
    }
    // Still registered, in its slot, with its lock held: alive to every other opener.
    let after = mine(&q);
    assert_eq!(
        (after.slot, after.generation, after.alive),
        (before.slot, before.generation, true)
    );
    let other = Queue::open(&name).unwrap();
    let seen = other.inspect(0).unwrap().participants;
    let parent = seen
        .iter()
        .find(|p| p.slot == before.slot)
        .expect("the parent's slot");
    assert!(parent.alive && !parent.is_self, "{seen:?}");
    assert_ne!(
        mine(&other).slot,
        before.slot,
        "the next opener took the parent's slot"
    );
    // And it works: a message one way, received and deleted the other.
    q.send(&SendMessage::new("g", "after the fork")).unwrap();
    let got = other
        .receive(&ReceiveOptions::max(1).wait(Duration::from_secs(1)))
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, "after the fork");
    other.delete(&got[0].receipt_handle).unwrap();

    // An `AsyncQueue` whose watcher thread runs: a child dropping its copy ends at once and
    // cleanly, though the watcher does not exist there (only the forking thread is copied).
    // (glibc marks the copied threads gone, so a join would return too; the drop skips it in a
    // child whatever the C library.) Run with the `tokio` feature (`ci/test-all.sh`).
    #[cfg(feature = "tokio")]
    {
        let aq = shmfifo::AsyncQueue::new(Queue::open(&name).unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        // An empty queue: the receive waits, which starts the watcher.
        let got = rt
            .block_on(aq.receive(&ReceiveOptions::max(1).wait(Duration::from_millis(20))))
            .unwrap();
        assert!(got.is_empty());
        // SAFETY: as above; the child drops the handle and `_exit`s.
        match unsafe { libc::fork() } {
            -1 => panic!("fork: {}", std::io::Error::last_os_error()),
            0 => {
                drop(aq);
                // SAFETY: ends the child at once.
                unsafe { libc::_exit(0) }
            }
            child => {
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                let mut status = 0;
                loop {
                    // SAFETY: polls our own child, writing into a local.
                    let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
                    if r == child {
                        break;
                    }
                    if std::time::Instant::now() > deadline {
                        // SAFETY: our own child.
                        unsafe { libc::kill(child, libc::SIGKILL) };
                        panic!("the child hung dropping its AsyncQueue");
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                assert!(
                    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                    "{status}"
                );
            }
        }
        drop(aq); // the parent's: its watcher joined
    }
}

/// Unlinks the queue at the end, passed or failed.
struct Unlink(String);

impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = Queue::unlink(&self.0);
    }
}
