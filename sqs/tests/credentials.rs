//! Credentials that cannot be loaded (none configured: no keys in the environment, no
//! profile, no instance metadata) fail before any request, as a dispatch failure of the SDK's:
//! the backend reports them as refused credentials (`RemoteKind::Credentials`, which ends a
//! bridge), not as an unreachable endpoint (which a bridge retries forever). Its own process:
//! it clears the environment the other tests set.

use shmfifo::{Error, FifoQueue, RemoteKind, SendMessage};
use shmfifo_sqs::SqsQueue;

#[test]
fn credentials_that_cannot_be_loaded_are_refused_credentials() {
    // SAFETY: the only test of this binary, and it starts no thread before these calls.
    unsafe {
        for v in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_ENDPOINT_URL",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        ] {
            std::env::remove_var(v);
        }
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::set_var("AWS_CONFIG_FILE", "/nonexistent/shmfifo-test/config");
        std::env::set_var(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/shmfifo-test/credentials",
        );
        std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
    }
    // Nothing listens on port 1: were the request sent, it would fail as unreachable.
    let q = SqsQueue::open_url(
        "http://127.0.0.1:1/000000000000/orders.fifo",
        Some("http://127.0.0.1:1"),
    )
    .unwrap();
    let r = FifoQueue::send(&q, &SendMessage::new("g", "m").dedup_id("1"));
    assert!(
        matches!(
            r,
            Err(Error::Remote {
                kind: RemoteKind::Credentials,
                ..
            })
        ),
        "{r:?}"
    );
}
