//! Unit tests of the queue configuration: its checks, the geometry it derives, the
//! redrive policy's parsing.

/// A default queue in a container's 64 MiB `/dev/shm`, empty: its limit is the base file
/// plus a quarter of the rest, room for the small class to grow twice (32,768 slots, four
/// times the base file's) and for the class of 1 MiB messages. A quarter of all 64 MiB (16
/// MiB, under the base file) kept neither. With 16 MiB free (under the base file): no
/// growth, and no 1 MiB class.
#[test]
fn a_default_queue_grows_in_a_64_mib_dev_shm() {
    let cfg = QueueConfig::new();
    let base = cfg.arena_size().unwrap();
    let g = cfg.geometry_within(Some(64 << 20)).unwrap();
    assert_eq!(g.size_limit, base + ((64 << 20) - base) / 4);
    assert_eq!(g.max_slots(0), 4 * u64::from(DEFAULT_MAX_MESSAGES));
    assert!(g.classes.last().is_some_and(|&(p, _)| p >= 1 << 20));
    let tight = cfg.geometry_within(Some(16 << 20)).unwrap();
    assert_eq!(tight.max_slots(0), u64::from(DEFAULT_MAX_MESSAGES));
    assert!(tight.classes.last().is_some_and(|&(p, _)| p < 1 << 20));
    let explicit = cfg.size_limit(0).geometry_within(Some(64 << 20)).unwrap();
    assert_eq!(explicit.max_slots(0), u64::from(DEFAULT_MAX_MESSAGES));
}

/// X1: a RedrivePolicy copied from AWS works: an SQS queue ARN names the local queue, every
/// JSON escape is read (surrogate pairs too), a count may be a string; other ARNs, unpaired
/// surrogates and unknown escapes are refused with a reason.
#[test]
fn x1_redrive_policy_json_as_sqs_takes_it() {
    let p = |j: &str| parse_redrive_policy(j);
    let got = p(r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq.fifo","maxReceiveCount":3}"#)
        .unwrap();
    assert_eq!(
        (got.dead_letter_queue.as_str(), got.max_receive_count),
        ("dlq.fifo", 3)
    );
    let got = p(r#"{"deadLetterTargetArn":"arn:aws-cn:sqs:cn-north-1:1:d","maxReceiveCount":"7"}"#)
        .unwrap();
    assert_eq!(
        (got.dead_letter_queue.as_str(), got.max_receive_count),
        ("d", 7)
    );
    let got = p(r#"{ "maxReceiveCount" : 2 , "deadLetterTargetArn" : "\/dev\/shm\/d\u00e9\ud83d\ude00\t" }"#).unwrap();
    assert_eq!(got.dead_letter_queue, "/dev/shm/d\u{e9}\u{1f600}\t");
    for bad in [
        r#"{"deadLetterTargetArn":"arn:aws:sns:us-east-1:1:topic","maxReceiveCount":3}"#,
        r#"{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:","maxReceiveCount":3}"#,
        r#"{"deadLetterTargetArn":"d\ud83d","maxReceiveCount":3}"#,
        r#"{"deadLetterTargetArn":"d\x","maxReceiveCount":3}"#,
        r#"{"deadLetterTargetArn":"d","maxReceiveCount":3,"other":1}"#,
        // What JSON is not: a form feed as whitespace, a raw control byte in a string
        // (`shmfifo serve` reads policies with serde_json, which refuses both; read here
        // as something else they carried a target nobody checked).
        "\u{c}{\"deadLetterTargetArn\":\"d\",\"maxReceiveCount\":3}",
        "{\"deadLetterTargetArn\":\"d\",\"maxReceiveCount\":3}\u{b}",
        "{\"deadLetterTargetArn\":\"d\u{1}\",\"maxReceiveCount\":3}",
        "{\"deadLetterTargetArn\":\"d\tx\",\"maxReceiveCount\":3}",
        r#"{"deadLetterTargetArn":"d","maxReceiveCount":03}"#,
        r#"{"deadLetterTargetArn":"d\u+1e9","maxReceiveCount":3}"#,
    ] {
        assert!(p(bad).is_err(), "{bad:?}");
    }
    // JSON's own whitespace is taken everywhere.
    assert!(p("\r\n\t {\"deadLetterTargetArn\" :\n\"d\",\t\"maxReceiveCount\":3 }\n").is_ok());
}
use super::*;

#[test]
fn default_geometry() {
    let g = QueueConfig::new().geometry().unwrap();
    assert_eq!(g.classes.first(), Some(&(192, 8_192)));
    let n = g.classes.len();
    // The base file is laid out for 256 KiB messages, whatever the MaximumMessageSize
    // (1 MiB by default, Q4)...
    assert_eq!(g.classes[n - 2].0, 262_144 + 128 + 80 + 256);
    // ... and the on-demand class (layout 15) takes 1 MiB messages, no slot in the base file.
    assert_eq!(g.classes[n - 1], (1_048_576 + 128 + 80 + 256, 0));
    assert!(g.growth(n - 1) > 0);
    assert!(g.classes.windows(2).all(|w| w[0].0 < w[1].0));
    // Set to 256 KiB explicitly: the same base file.
    let former = QueueConfig::new()
        .maximum_message_size(262_144)
        .geometry()
        .unwrap();
    assert_eq!(former.classes, g.classes);
    assert_eq!(former.offsets().unwrap().total, g.offsets().unwrap().total);
    assert_eq!(QueueConfig::new().message_size(), 1_048_576);
    // Without growth there is no on-demand class, and the default is what the base file
    // holds: 256 KiB, the same file.
    let fixed_cfg = QueueConfig::new().size_limit(0);
    assert_eq!(fixed_cfg.message_size(), 262_144);
    let fixed = fixed_cfg.geometry().unwrap();
    assert_eq!(fixed.classes.len(), n - 1);
    assert_eq!(fixed.offsets().unwrap().total, g.offsets().unwrap().total);
    assert_eq!(g.offsets().unwrap().total, 17_461_248);
    // 1 MiB asked of a queue that may not grow: its base file holds it (23.7 MiB).
    let fixed_1m = QueueConfig::new()
        .size_limit(0)
        .maximum_message_size(1_048_576)
        .geometry()
        .unwrap();
    assert_eq!(
        fixed_1m.classes.last(),
        Some(&(1_048_576 + 128 + 80 + 256, 4))
    );
    assert_eq!(fixed_1m.offsets().unwrap().total, 24_801_280);
    // Explicit classes: the default is what the largest holds.
    let classes = QueueConfig::new().size_classes(vec![(1024, 4), (262_656, 1)]);
    assert_eq!(classes.message_size(), 262_656 - 464);
    assert_eq!(g.group_slots, 8192);
    // The group table (layout 16): 8 added tables within the default 1 GiB (8,192 × 2^8
    // entries in all), so 4,096 + (2,097,152 − 8,192) / 2 = 1,048,576 groups at once.
    assert_eq!(g.group_growth, 8);
    assert_eq!(g.group_range(), 2_097_152);
    assert_eq!(fixed.group_growth, 0);
}

/// Three queues with the default settings fit in a container's default 64 MiB
/// `/dev/shm` with room to spare, keeping SQS's limits (1 MiB messages, 5-minute dedup
/// interval, 120,000 in flight).
#[test]
fn three_default_queues_fit_in_64_mib() {
    let c = QueueConfig::new();
    let size = c.arena_size().unwrap();
    assert!(3 * size <= 60 << 20, "default arena {size} B");
    assert_eq!(c.message_size(), 1_048_576);
    assert_eq!(c.deduplication_interval, Duration::from_secs(300));
    assert_eq!(c.max_in_flight, 120_000);
}

#[test]
fn one_mib_messages_are_allowed() {
    let g = QueueConfig::new()
        .maximum_message_size(1_048_576)
        .geometry()
        .unwrap();
    assert_eq!(g.classes.last().unwrap().0, 1_048_576 + 208 + 256);
}

#[test]
fn bad_settings_name_themselves() {
    let e = QueueConfig::new()
        .maximum_message_size(1_048_577)
        .geometry()
        .unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidConfig {
            setting: "maximum_message_size",
            ..
        }
    ));
    let e = QueueConfig::new()
        .visibility_timeout(Duration::from_secs(43_201))
        .geometry()
        .unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidConfig {
            setting: "visibility_timeout",
            ..
        }
    ));
    let e = QueueConfig::new()
        .size_classes(vec![(100, 1)])
        .geometry()
        .unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidConfig {
            setting: "size_classes",
            ..
        }
    ));
    let e = QueueConfig::new().max_groups(0).geometry().unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidConfig {
            setting: "max_groups",
            ..
        }
    ));
}
