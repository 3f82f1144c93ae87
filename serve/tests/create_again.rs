//! Q7 through serve: `CreateQueue` with the attributes a queue has is that queue. A
//! high-throughput FIFO queue (`DeduplicationScope=messageGroup`,
//! `FifoThroughputLimit=perMessageGroupId`, as consoles and infrastructure tools make it) was
//! created once and then refused (`QueueAlreadyExists`: its limit read back as `perQueue`),
//! so an application that creates its queue at every start failed at its second.

#[path = "support/server.rs"]
mod server;
use server::{config, post_json, Dir, Server};

#[test]
fn a_high_throughput_queue_created_again_is_the_same_queue() {
    let dir = Dir::new("create-again");
    let srv = Server::start(config(&dir.0));
    let create = r#"{"QueueName":"ht.fifo","Attributes":{"FifoQueue":"true","ContentBasedDeduplication":"true","DeduplicationScope":"messageGroup","FifoThroughputLimit":"perMessageGroupId"}}"#;
    let (status, first) = post_json(srv.addr, "CreateQueue", create);
    assert_eq!(status, 200, "{first}");
    let (status, again) = post_json(srv.addr, "CreateQueue", create);
    assert_eq!(status, 200, "{again}");
    assert!(again.contains("ht.fifo"), "{again}");
    // It reads back as set, and setting the fixed attributes to what they are succeeds.
    let url = srv.url("ht.fifo");
    let (status, out) = post_json(
        srv.addr,
        "GetQueueAttributes",
        &format!(r#"{{"QueueUrl":"{url}","AttributeNames":["All"]}}"#),
    );
    assert_eq!(status, 200, "{out}");
    assert!(
        out.contains(r#""FifoThroughputLimit":"perMessageGroupId""#),
        "{out}"
    );
    let (status, out) = post_json(
        srv.addr,
        "SetQueueAttributes",
        &format!(
            r#"{{"QueueUrl":"{url}","Attributes":{{"DeduplicationScope":"messageGroup","FifoThroughputLimit":"perMessageGroupId"}}}}"#
        ),
    );
    assert_eq!(status, 200, "{out}");
    // A different limit is still a different queue.
    let other = create.replace("perMessageGroupId", "perQueue");
    let (status, out) = post_json(srv.addr, "CreateQueue", &other);
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("QueueAlreadyExists"), "{out}");
}
