//! Harness for the loom models: heap arenas, a mock environment, and short-hand operations.
//!
//! Run with `RUSTFLAGS="--cfg shmfifo_loom" cargo test -p shmfifo-loom-tests --release`
//! (see `ci/loom.sh`). Without the cfg this crate compiles to nothing.
#![cfg(shmfifo_loom)]
#![allow(missing_docs)]

pub use loom::sync::Arc;

/// `loom::thread` with a `spawn` that works around tokio-rs/loom#392: a spawned thread whose
/// first operation is an atomic load is never preempted, so every model thread starts with an
/// RMW on a private atomic.
pub mod thread {
    pub use loom::thread::{yield_now, JoinHandle};

    /// Spawns a model thread (see the module docs).
    pub fn spawn<F, T>(f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + 'static,
        T: 'static,
    {
        loom::thread::spawn(move || {
            let first = shmfifo::sync::AtomicU64::new(0);
            first.fetch_add(1, shmfifo::sync::Ordering::Relaxed);
            f()
        })
    }
}
pub use shmfifo::layout::Geometry;
pub use shmfifo::protocol::handle::{self, Handle};
pub use shmfifo::protocol::heap::{HeapArena, MockEnv};
pub use shmfifo::protocol::send::{self, Outgoing};
pub use shmfifo::protocol::{accounting, doorbell, grow, ready, receive, recovery, sweep, words};
pub use shmfifo::protocol::{crash, dedup, gstate, owner, vis, Arena, Fault, Owner, PResult};
pub use shmfifo::sync::Ordering;

/// Runs `f` and `g` on two model threads and returns both results. The main thread only
/// sets up and checks: a model thread that starts with a load while the main thread works is
/// never preempted (tokio-rs/loom#392), so all concurrent work runs on spawned threads.
pub fn par<A, B>(f: impl FnOnce() -> A + 'static, g: impl FnOnce() -> B + 'static) -> (A, B)
where
    A: 'static,
    B: 'static,
{
    let t = thread::spawn(f);
    let u = thread::spawn(g);
    (t.join().unwrap(), u.join().unwrap())
}

/// An arena with `participants` participants, `groups` max groups and one class of `slots`
/// 16-byte slots, without a dedup table.
pub fn arena(participants: u32, groups: u32, slots: u32) -> Arc<HeapArena> {
    arena_dedup(participants, groups, slots, 0)
}

/// As [`arena`], with a dedup table of `dedup_slots` entries (queue scope).
pub fn arena_dedup(participants: u32, groups: u32, slots: u32, dedup_slots: u32) -> Arc<HeapArena> {
    Arc::new(HeapArena::new(&geometry(
        participants,
        groups,
        slots,
        dedup_slots,
    )))
}

/// The geometry of [`arena_dedup`]: nothing may grow.
fn geometry(participants: u32, groups: u32, slots: u32, dedup_slots: u32) -> Geometry {
    let group_slots = (groups * 2).next_power_of_two();
    Geometry {
        participants,
        max_groups: groups,
        group_slots,
        ready_slots: group_slots,
        classes: vec![(16, slots)],
        dedup_slots,
        dedup_key_words: shmfifo::layout::DEDUP_KEY_WORDS,
        attempt_slots: 2,
        class_growth: Vec::new(),
        size_limit: 0,
        dedup_growth: 0,
        group_growth: 0,
    }
}

/// An arena whose one class holds packs (layout 22): `slots` slots of 384 bytes (a pack of four
/// one-byte members takes 321), its directories in the heap arena's side table
/// (`HeapArena::with_packs`), and a dedup table of `dedup_slots` entries (queue scope).
pub fn arena_packs(participants: u32, groups: u32, slots: u32, dedup_slots: u32) -> Arc<HeapArena> {
    Arc::new(HeapArena::with_packs(&Geometry {
        classes: vec![(384, slots)],
        ..geometry(participants, groups, slots, dedup_slots)
    }))
}

/// An arena of `participants` participants, `groups` max groups and one class of `slots`
/// 16-byte slots that may add `growth` segments (layout 13), without a dedup table.
pub fn arena_growing(participants: u32, groups: u32, slots: u32, growth: u32) -> Arc<HeapArena> {
    Arc::new(HeapArena::new(&Geometry {
        class_growth: vec![growth],
        size_limit: 1 << 30,
        ..geometry(participants, groups, slots, 0)
    }))
}

/// An arena with a dedup table of `dedup_slots` entries (queue scope) that may add
/// `dedup_growth` segments (layout 14), and one class of `slots` 16-byte slots.
pub fn arena_dedup_growing(
    participants: u32,
    groups: u32,
    slots: u32,
    dedup_slots: u32,
    dedup_growth: u32,
) -> Arc<HeapArena> {
    Arc::new(HeapArena::new(&Geometry {
        size_limit: 1 << 30,
        dedup_growth,
        ..geometry(participants, groups, slots, dedup_slots)
    }))
}

/// An arena of `participants` participants whose group table holds `groups` groups in the
/// base file and may add `growth` tables (layout 16: twice the entries each), with one class of
/// `slots` 16-byte slots, without a dedup table.
pub fn arena_groups_growing(
    participants: u32,
    groups: u32,
    slots: u32,
    growth: u32,
) -> Arc<HeapArena> {
    Arc::new(HeapArena::new(&Geometry {
        size_limit: 1 << 30,
        group_growth: growth,
        ..geometry(participants, groups, slots, 0)
    }))
}

/// Runs `f` as participant `who`, stopping it forever at its `k`-th crash point (if `k` is
/// given); marks it dead in `env` if it stopped (as the kernel drops its liveness lock).
pub fn as_participant<T>(env: &MockEnv, who: u32, k: Option<u32>, f: impl FnOnce() -> T) -> T {
    if let Some(k) = k {
        crash::arm(k);
    }
    let r = f();
    if crash::crashed() {
        env.kill(who);
    }
    r
}

/// Owner code of participant `i` (heap arenas register everyone at generation 1).
pub fn me(i: u32) -> Owner {
    owner::code(i, 1)
}

/// A deterministic hash (the protocol is generic over it; the API uses keyed SipHash).
pub fn hash(id: &[u8]) -> u64 {
    id.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Sends `body` to `group` as participant `who`.
pub fn send(
    a: &Arena<'_>,
    env: &MockEnv,
    who: u32,
    group: &str,
    body: &[u8],
) -> PResult<send::Sent> {
    send_with(a, env, who, group, body, None, None)
}

/// Sends `body` to `group` as participant `who`, passing `hint` (where an earlier send found
/// the group, [`send::Sent::group`]) for the protocol to try before a lookup.
pub fn send_hinted(
    a: &Arena<'_>,
    env: &MockEnv,
    who: u32,
    group: &str,
    body: &[u8],
    hint: Option<shmfifo::protocol::group::Found>,
) -> PResult<send::Sent> {
    send_with(a, env, who, group, body, None, hint)
}

/// Sends `body` to `group` with dedup id `key` as participant `who`. `home` forces the key's
/// hash (so that different keys can share a home entry, or collide outright).
pub fn send_dedup(
    a: &Arena<'_>,
    env: &MockEnv,
    who: u32,
    group: &str,
    body: &[u8],
    key: &str,
    home: u64,
) -> PResult<send::Sent> {
    send_with(a, env, who, group, body, Some(self::key(key, home)), None)
}

fn send_with(
    a: &Arena<'_>,
    env: &MockEnv,
    who: u32,
    group: &str,
    body: &[u8],
    dedup: Option<dedup::Key<'_>>,
    group_hint: Option<shmfifo::protocol::group::Found>,
) -> PResult<send::Sent> {
    let parts = [body];
    send::send(
        a,
        env,
        me(who),
        &Outgoing {
            class: 0,
            cursor: u64::from(who),
            hash: hash(group.as_bytes()),
            group_id: group.as_bytes(),
            group_hint,
            lens: words::pack_lens(body.len(), 0, 0, 0),
            parts: &parts,
            dedup,
            source_len: 0,
            prior_receives: 0,
            loaned: None,
            in_place: 0,
        },
    )
}

/// Sends `bodies` to `group` as participant `who`, as one chain (`send::send_chain`, what a
/// batch does); one result per body.
pub fn send_batch(
    a: &Arena<'_>,
    env: &MockEnv,
    who: u32,
    group: &str,
    bodies: &[&[u8]],
) -> PResult<Vec<PResult<send::Sent>>> {
    let parts: Vec<[&[u8]; 1]> = bodies.iter().map(|b| [*b]).collect();
    let outs: Vec<Outgoing<'_>> = bodies
        .iter()
        .zip(&parts)
        .map(|(b, p)| Outgoing {
            class: 0,
            cursor: u64::from(who),
            hash: hash(group.as_bytes()),
            group_id: group.as_bytes(),
            group_hint: None,
            lens: words::pack_lens(b.len(), 0, 0, 0),
            parts: p,
            dedup: None,
            source_len: 0,
            prior_receives: 0,
            loaned: None,
            in_place: 0,
        })
        .collect();
    let refs: Vec<&Outgoing<'_>> = outs.iter().collect();
    let mut results: Vec<PResult<send::Sent>> = refs.iter().map(|_| Err(Fault::Expired)).collect();
    send::send_chain(a, env, me(who), &refs, &mut results)?;
    Ok(results)
}

/// A dedup key `key` whose hash is forced to `home` (see [`send_dedup`]).
pub fn key(key: &str, home: u64) -> dedup::Key<'_> {
    dedup::Key {
        hash: home,
        // The key's other hash half: distinct for distinct keys, whatever their home.
        check: key
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))),
        dedup: key.as_bytes(),
        group: &[],
    }
}

/// Sends `bodies` to `group` as participant `who` as one pack where they make one
/// (`send::send_chain_as` with `Packing::Where`), each with dedup id `keys[k]` (hash `k`)
/// if `keys` is given; one result per body.
pub fn send_pack(
    a: &Arena<'_>,
    env: &MockEnv,
    who: u32,
    group: &str,
    bodies: &[&[u8]],
    keys: Option<&[&str]>,
) -> PResult<Vec<PResult<send::Sent>>> {
    let parts: Vec<[&[u8]; 1]> = bodies.iter().map(|b| [*b]).collect();
    let outs: Vec<Outgoing<'_>> = bodies
        .iter()
        .zip(&parts)
        .enumerate()
        .map(|(k, (b, p))| Outgoing {
            class: 0,
            cursor: u64::from(who),
            hash: hash(group.as_bytes()),
            group_id: group.as_bytes(),
            group_hint: None,
            lens: words::pack_lens(b.len(), 0, 0, 0),
            parts: p,
            dedup: keys.map(|ks| key(ks[k], k as u64)),
            source_len: 0,
            prior_receives: 0,
            loaned: None,
            in_place: 0,
        })
        .collect();
    let refs: Vec<&Outgoing<'_>> = outs.iter().collect();
    let mut results: Vec<PResult<send::Sent>> = refs.iter().map(|_| Err(Fault::Expired)).collect();
    send::send_chain_as(a, env, me(who), &refs, &mut results, send::Packing::Where)?;
    Ok(results)
}

/// Receives up to `max` messages as `who`; returns (handle, body) pairs.
pub fn recv(
    a: &Arena<'_>,
    env: &MockEnv,
    who: u32,
    max: usize,
    vt: u64,
) -> PResult<Vec<(Handle, Vec<u8>)>> {
    let mut out = Vec::new();
    receive::receive(
        a,
        env,
        me(who),
        max,
        &mut receive::Policy::new(vt),
        &mut |t| {
            out.push((t.handle(), t.payload.to_vec()));
            true
        },
    )?;
    Ok(out)
}

/// Receives up to `max` messages as `who` (visibility timeout `vt`) and deletes each; returns
/// their bodies in delivery order.
pub fn recv_and_delete(
    a: &Arena<'_>,
    env: &MockEnv,
    who: u32,
    max: usize,
    vt: u64,
) -> Vec<Vec<u8>> {
    let got = recv(a, env, who, max, vt).unwrap();
    for (hd, _) in &got {
        handle::delete(a, env, me(who), *hd).unwrap();
    }
    got.into_iter().map(|(_, b)| b).collect()
}

/// Receives and deletes everything, as `who`, sweeping once if hints run out. Returns bodies in
/// delivery order.
pub fn drain(a: &Arena<'_>, env: &MockEnv, who: u32) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut swept = false;
    loop {
        let batch = recv(a, env, who, 10, 1_000).expect("receive");
        if batch.is_empty() {
            if swept {
                return got;
            }
            sweep::sweep(a, env, me(who)).expect("sweep");
            swept = true;
            continue;
        }
        swept = false;
        for (h, body) in batch {
            handle::delete(a, env, me(who), h).expect("delete");
            got.push(body);
        }
    }
}

/// The lifetime `DELETED` counts summed over the participants (loom counts without stripes).
pub fn deleted_count(a: &Arena<'_>) -> u64 {
    a.parts
        .iter()
        .map(|p| p.counters[shmfifo::layout::counter::DELETED].load(Ordering::SeqCst))
        .sum()
}

/// Deletes `handle` (participant 0's, of group "g", whose first message stays in flight)
/// while participant 1 receives from the group: a hint of the group is queued first, so that
/// the receive takes the group's claim a moment (and takes nothing: the group is locked, R3).
/// The delete succeeds and is counted once, at once, whichever of them held the claim (layout
/// 25: a delete that finds it held leaves its message uncounted for the holder to count).
pub fn delete_beside_a_locked_receive(h: &Arc<HeapArena>, env: &Arc<MockEnv>, handle: Handle) {
    let a = h.arena();
    let (g, _) = shmfifo::protocol::group::find(&a, hash(b"g"), b"g")
        .unwrap()
        .unwrap();
    ready::hint(&a, &**env, me(2), g).unwrap();
    let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
    let (d, theirs) = par(
        move || handle::delete(&h1.arena(), &*e1, me(0), handle),
        move || recv(&h2.arena(), &e2, 1, 10, 1_000).unwrap(),
    );
    d.unwrap();
    assert!(theirs.is_empty(), "R3: the group is locked");
    assert_eq!(deleted_count(&a), 1, "counted once, at once");
}

/// Asserts that every slot is free and every group left is kept (idle, layout 19: `ACTIVE`,
/// its list reopened and empty), and that the count holds exactly those.
pub fn assert_clean(a: &Arena<'_>) {
    for (_, h) in a.slots() {
        let w = h.own.vis.load(Ordering::SeqCst);
        assert_eq!(vis::state(w), vis::State::Free, "a slot was not reclaimed");
    }
    let mut kept = 0;
    for (g, e) in a.all_groups() {
        let k = gstate::kind(e.state.load(Ordering::SeqCst));
        assert!(k != gstate::INSERTING, "an insert was left unfinished");
        if k == gstate::ACTIVE {
            assert!(
                shmfifo::protocol::kept::is_kept(a, g, e),
                "a group was not emptied"
            );
            assert_eq!(
                e.tail.load(Ordering::SeqCst),
                e.head.load(Ordering::SeqCst),
                "an idle group's tail is not its head"
            );
            assert_eq!(
                e.pending_free.load(Ordering::SeqCst),
                0,
                "a dummy left named"
            );
            kept += 1;
        }
    }
    assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), kept);
}

// Per test: the tests of one binary run on threads of their own, and loom runs a model's
// threads on the thread of the test that runs it, so a flag per OS thread is a flag per test
// (one shared flag let a test's reset hide another's stop).
std::thread_local! {
    static STOPPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Says that a model's participant stopped at its armed step in this execution (see
/// [`at_each_step`]).
pub fn stopped() {
    STOPPED.with(|s| s.set(true));
}

/// Runs `case(k)` for k = 0, 1, …: a model whose participant stops at its `k`-th step and
/// calls [`stopped`] when it did; ends at the first `k` at which no execution stopped (the
/// participant passed every step), after more than `min` steps, or fails after `max`.
pub fn at_each_step(max: u32, min: u32, case: impl Fn(u32)) {
    for k in 0..max {
        STOPPED.with(|s| s.set(false));
        case(k);
        if !STOPPED.with(|s| s.get()) {
            assert!(k > min, "only {k} steps were reached");
            return;
        }
    }
    panic!("still stopping after {max} steps");
}

/// Runs a whole quarantine pass as participant `who`: every suspected group is begun and
/// finished. Returns the messages it reported.
pub fn quarantine_all(a: &Arena<'_>, env: &MockEnv, who: u32) -> PResult<usize> {
    let mut n = 0;
    let mut p = shmfifo::protocol::group::Patience::new();
    for g in 0..a.groups.len() as u32 {
        if !shmfifo::protocol::quarantine::suspect(a, env, me(who), g) {
            continue;
        }
        if let Some(q) = shmfifo::protocol::quarantine::begin(a, env, me(who), g, &mut p)? {
            n += q.messages.len();
            shmfifo::protocol::quarantine::finish(a, env, me(who), &q)?;
        }
    }
    Ok(n)
}

/// Runs `f` under loom with the project's bounds.
pub fn model<F: Fn() + Sync + Send + 'static>(f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    // Sequential set-up and draining count as branches too; bounded work, not spinning.
    b.max_branches = 20_000;
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    RUNS.store(0, std::sync::atomic::Ordering::Relaxed);
    b.check(move || {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    if std::env::var_os("SHMFIFO_LOOM_VERBOSE").is_some() {
        eprintln!(
            "explored {} executions",
            RUNS.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
}
