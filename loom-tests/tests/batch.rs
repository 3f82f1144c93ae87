//! Models of a batch sent as one chain (issue 14): the producer links its messages to each
//! other, appends the chain by one CAS and publishes each, and may die at each of those steps,
//! while another participant sends a single message to the same group and a third receives.
//! The chain is committed whole or not at all, in order, and never interleaved with another
//! producer's message.
#![cfg(shmfifo_loom)]

use shmfifo_loom_tests::*;

/// Participant 1 sends "a", "b" to group "g" as one chain and dies at its `k`-th step;
/// participant 2 meanwhile sends "c" to "g". After recovery and a drain: "a" and "b" were both
/// delivered or neither (delivered if 1's call returned them as sent), in that order, with "c"
/// before both or after both; "c" always; nothing twice; every slot free.
#[test]
fn a_chain_is_committed_whole_or_not_at_all_and_never_interleaved() {
    for k in 0..10 {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (chain, single) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        send_batch(&h1.arena(), &e1, 1, "g", &[b"a", b"b"])
                    })
                },
                move || send(&h2.arena(), &e2, 2, "g", b"c"),
            );
            single.expect("the single send is served");
            let a = h.arena();
            recovery::recover(&a, &*env, me(0)).unwrap();
            let got = drain(&a, &env, 0);
            let pos = |b: &[u8]| got.iter().position(|x| x == b);
            assert!(pos(b"c").is_some(), "c delivered: {got:?}");
            match (pos(b"a"), pos(b"b")) {
                (Some(x), Some(y)) => {
                    assert_eq!(y, x + 1, "a then b, nothing between: {got:?}");
                }
                (None, None) => {
                    if let Ok(rs) = &chain {
                        assert!(
                            rs.iter().all(|r| r.is_err()),
                            "a chain reported sent was delivered: {got:?}"
                        );
                    }
                }
                _ => panic!("half a chain: {got:?}"),
            }
            assert_eq!(
                got.len(),
                got.iter().collect::<std::collections::HashSet<_>>().len()
            );
            assert_clean(&a);
        });
    }
}
