//! Operators' views: lifetime counters, peek, inspect and the queue attributes (C1).

use std::time::Duration;

use super::copy_out::Filler;
use super::queue::{fault, Queue};
use super::types::*;
use super::views::*;
use crate::config::DedupOverflow;
use crate::error::{Error, Result};
use crate::protocol::message::MAX_ID_LEN;
use crate::protocol::{accounting, dedup, group, grow, inspect, kept, live, recovery, Env};

impl Queue {
    /// The queue's lifetime counters, summed over every participant that ever used it. Cheap
    /// (one load per counter per participant slot) and safe while the queue is in use.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// let msg = SendMessage::new("g", "once").dedup_id("1");
    /// q.send(&msg)?;
    /// q.send(&msg)?; // a duplicate
    /// let m = q.receive(&ReceiveOptions::default())?.remove(0);
    /// q.delete(&m.receipt_handle)?;
    /// let c = q.counters();
    /// assert_eq!((c.sent, c.duplicates, c.received, c.deleted), (1, 1, 1, 1));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn counters(&self) -> Counters {
        Counters {
            // This handle's tally of empty polls included (other handles add theirs in batches).
            // The shared count is untrusted (any value): saturating, never an overflow.
            empty_receives: accounting::empty_receives(self.arena()).saturating_add(
                self.inner
                    .empty_polls
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
            ..Counters::from_array(&accounting::counters(self.arena()))
        }
    }

    /// How large the queue's file is and may grow: the bytes in use (base file and added
    /// segments), the base file, the size limit, and how many segments were added (and
    /// refused by the file system). Cheap: a few loads.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Deduplication, Queue, QueueConfig, SendMessage};
    ///
    /// let cfg = QueueConfig::new()
    ///     .deduplication(Deduplication::Off)
    ///     .max_messages(16)
    ///     .size_limit(64 << 20);
    /// let q = Queue::create_anonymous(&cfg)?;
    /// let before = q.size();
    /// assert_eq!(before.bytes, before.base_bytes);
    /// assert_eq!(before.limit_bytes, 64 << 20);
    /// for i in 0..100 {
    ///     q.send(&SendMessage::new("g", &i.to_string()))?; // 16 slots: the class grows
    /// }
    /// let after = q.size();
    /// assert!(after.grows >= 3 && after.bytes > before.bytes);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn size(&self) -> QueueSize {
        let s = grow::size(self.arena());
        QueueSize {
            bytes: s.bytes,
            base_bytes: s.base,
            limit_bytes: s.limit,
            grows: s.grows,
            refused_grows: s.refused,
        }
    }

    /// Reads up to `max` messages that a receive could return now (each group's visible
    /// prefix, groups in table order), changing nothing: no receive count, no visibility,
    /// no receipt. A snapshot: another process may receive them at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g", "hello").dedup_id("1"))?;
    /// let peeked = q.peek(10)?;
    /// assert_eq!(peeked.len(), 1);
    /// assert_eq!(peeked[0].body, "hello");
    /// assert_eq!(peeked[0].receive_count, 0);
    /// // Peeking changed nothing: the receive is still the message's first.
    /// let got = q.receive(&ReceiveOptions::default())?;
    /// assert_eq!(got[0].message_id, peeked[0].message_id);
    /// assert_eq!(got[0].receive_count, 1);
    /// // In flight now, so no receive could return it.
    /// assert!(q.peek(10)?.is_empty());
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn peek(&self, max: usize) -> Result<Vec<PeekedMessage>> {
        let inner = &*self.inner;
        let mut m = Message::default();
        let mut filler = Filler::new(inner);
        let (out, bad) = inspect::peek(self.arena(), inner, max, &mut |t| {
            filler.fill(&mut m, t)?;
            Ok(PeekedMessage::from(std::mem::take(&mut m)))
        })
        .map_err(|f| fault(f, inner))?;
        // A file cut under the look (`sys::guard`): what it copied may be zeros.
        inner.live()?;
        match bad {
            // A copy that failed to parse although its message was unchanged: corruption.
            Some(what) if out.is_empty() => Err(Error::Corrupted { what }),
            _ => Ok(out),
        }
    }

    /// A read-only snapshot of everything about the queue (what `shmfifo stat` prints):
    /// messages by state, active and locked groups with the `top` largest by backlog,
    /// participants alive and dead, slot use by size class, lifetime counters. It scans every
    /// slot and walks every group's list: O(capacity + groups), for operators, not hot paths.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// for (group, dedup) in [("a", "1"), ("b", "2"), ("b", "3")] {
    ///     q.send(&SendMessage::new(group, "m").dedup_id(dedup))?;
    /// }
    /// q.receive(&ReceiveOptions::default())?; // one message goes in flight
    /// let i = q.inspect(1)?;
    /// assert_eq!((i.messages.visible, i.messages.in_flight), (2, 1));
    /// assert_eq!((i.active_groups, i.locked_groups), (2, 1));
    /// assert_eq!(i.largest_groups[0].group_id, "b");
    /// assert_eq!(i.largest_groups[0].backlog(), 2);
    /// assert!(i.participants.iter().any(|p| p.is_self && p.alive));
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn inspect(&self, top: usize) -> Result<Inspection> {
        let inner = &*self.inner;
        let a = self.arena();
        // One scan of the slots: messages by state, per size class and in total.
        let mut size_classes = Vec::new();
        let c = accounting::counts_per_class(a, inner, &mut |cl, u| {
            let k = size_classes.len();
            let slots = a.slots_now(k) as u32;
            // Slots, not messages: a pack (layout 22) is one slot of several messages.
            let used = u.slots_published as u32;
            let (sending, deleted) = (u.sending as u32, u.slots_deleted as u32);
            size_classes.push(SizeClassUse {
                payload_bytes: cl.cap,
                slot_bytes: cl.slot_bytes(),
                slots,
                max_slots: cl.max_slots() as u32,
                free: slots.saturating_sub(used + sending + deleted),
                sending,
                used,
                deleted,
            });
        });
        let groups = inspect::groups(a, inner, top).map_err(|f| fault(f, inner))?;
        let mut id = [0u8; MAX_ID_LEN];
        let largest_groups = groups
            .largest
            .iter()
            .map(|g| {
                let n = inspect::group_id(a, g.index, &mut id);
                GroupInfo {
                    group_id: String::from_utf8_lossy(&id[..n]).into_owned(),
                    visible: g.visible,
                    in_flight: g.in_flight,
                    delayed: g.delayed,
                    sending: g.sending,
                    locked: g.locked,
                }
            })
            .collect();
        let dead = recovery::dead_participants(a, inner, inner.me);
        let participants = inspect::members(a)
            .into_iter()
            .map(|m| ParticipantInfo {
                slot: m.slot,
                generation: m.generation,
                pid: m.pid,
                alive: !dead.contains(&(m.slot, m.generation)),
                is_self: m.owner == inner.me,
            })
            .collect();
        let counters = self.counters();
        inner.live()?;
        Ok(Inspection {
            attributes: self.attributes_from(&c, &counters),
            messages: MessageCounts {
                visible: c.visible,
                in_flight: c.in_flight,
                delayed: c.delayed,
                sending: c.sending,
                deleted: c.deleted,
            },
            active_groups: groups.active,
            locked_groups: groups.locked,
            kept_groups: groups.kept,
            group_entries_in_use: live::stats(a).group_entries_in_use,
            largest_groups,
            participants,
            size_classes,
            size: self.size(),
            counters,
            damaged_groups: groups
                .damaged
                .iter()
                .map(|&(index, reason)| DamagedGroup { index, reason })
                .collect(),
        })
    }

    /// Settings and approximate counters (C1). Counting scans every slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};
    ///
    /// let q = Queue::create_anonymous(&QueueConfig::new())?;
    /// q.send(&SendMessage::new("g1", "a").dedup_id("1"))?;
    /// q.send(&SendMessage::new("g2", "b").dedup_id("2"))?;
    /// q.receive(&ReceiveOptions::default())?;
    /// let a = q.attributes();
    /// assert_eq!(a.approximate_number_of_messages, 1);
    /// assert_eq!(a.approximate_number_of_messages_not_visible, 1);
    /// assert_eq!(a.visibility_timeout, Duration::from_secs(30)); // the default
    /// assert!(a.fifo_queue);
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn attributes(&self) -> QueueAttributes {
        self.attributes_from(
            &accounting::counts(self.arena(), &*self.inner),
            &self.counters(),
        )
    }

    /// The attributes, with the message counts and lifetime counters already read.
    pub(super) fn attributes_from(
        &self,
        c: &accounting::Counts,
        counters: &Counters,
    ) -> QueueAttributes {
        let inner = &*self.inner;
        let live = live::read(self.arena());
        let stats = live::stats(self.arena());
        let size = self.size();
        QueueAttributes {
            approximate_number_of_messages: c.visible,
            approximate_number_of_messages_not_visible: c.in_flight,
            approximate_number_of_messages_delayed: c.delayed,
            approximate_age_of_oldest_message: Duration::from_millis(if c.oldest_sent == 0 {
                0
            } else {
                inner.now_ms().saturating_sub(c.oldest_sent)
            }),
            visibility_timeout: Duration::from_millis(self.default_vt_ms()),
            delay: Duration::from_millis(live.delay_ms),
            message_retention_period: Duration::from_millis(live.retention_ms),
            redrive_policy: self.redrive_policy().ok().flatten(),
            max_in_flight: live::max_in_flight(self.arena()),
            release_on_death: recovery::release_on_death(self.arena()),
            body_mode: self.body_mode(),
            in_flight_count: accounting::in_flight(self.arena()),
            in_flight_limit_hits: counters.in_flight_limit_hits,
            moved_to_dead_letter: counters.moved_to_dead_letter,
            retention_expiries: counters.retention_expiries,
            receive_message_wait_time: Duration::from_millis(self.default_wait_ms()),
            maximum_message_size: self.maximum_message_size(),
            created_timestamp: inner.created_wall_ms,
            last_modified_timestamp: crate::protocol::live::modified_wall_ms(&inner.view)
                .max(inner.created_wall_ms),
            fifo_queue: true,
            active_groups: kept::count_active(&inner.view),
            max_groups: group::capacity_max(&inner.view),
            group_capacity: group::capacity_now(&inner.view),
            group_base_entries: inner.view.group_base_entries(),
            attempt_entries: inner.view.attempt_entries(),
            max_participants: inner.view.participant_slots(),
            size_classes: inner.caps.clone(),
            arena_bytes: size.bytes,
            size_limit_bytes: size.limit_bytes,
            grows: size.grows,
            deduplication: inner.dedup,
            per_message_group_throughput: inner.per_group_throughput,
            content_based_deduplication: live.content_based_dedup,
            deduplication_interval: Duration::from_millis(inner.dedup_interval_ms),
            dedup_entries: inner.view.dedup_entries(),
            dedup_base_entries: inner.view.dedup_base_entries(),
            dedup_entries_in_use: {
                let (live, pending) = dedup::count(self.arena(), inner.now_ms());
                live + pending
            },
            dedup_overflow: if stats.dedup_refuses {
                DedupOverflow::Refuse
            } else {
                DedupOverflow::ShortenWindow
            },
            dedup_evictions: stats.dedup_evictions,
            effective_deduplication_interval: {
                let full = inner.dedup_interval_ms;
                let recent = stats.dedup_evictions > 0
                    && inner.now_ms().saturating_sub(stats.last_eviction_ms) < full;
                Duration::from_millis(if recent {
                    stats.last_eviction_age_ms.min(full)
                } else {
                    full
                })
            },
            quarantined_messages: stats.quarantined_messages,
            quarantined_groups: stats.quarantined_groups,
            test_clock_ms: inner.test_clock.then(|| inner.now_ms()),
        }
    }
}
