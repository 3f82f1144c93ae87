mod common;
use common::*;

#[test]
fn send_receive_delete_round_trip() {
    let q = queue("smoke", &small());
    send(&q, "g1", "a");
    send(&q, "g1", "b");
    send(&q, "g2", "c");
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), ["a", "b", "c"]);
    for m in &ms {
        q.delete(&m.receipt_handle).unwrap();
    }
    assert!(recv(&q, 10).is_empty());
    send(&q, "g1", "d");
    let ms = recv(&q, 10);
    assert_eq!(bodies(&ms), ["d"]);
}
