//! The bridge's rate ([`BridgeOptions::max_per_second`](super::BridgeOptions)): how many
//! messages may go to the workers now, and when the next one may.

use std::time::{Duration, Instant};

/// The most messages one request carries, and so the most allowance banked.
const REQUEST: u64 = 10;

/// Messages handed to the workers (`sent`) since `started`; the allowance is `rate` a second
/// since then. No rate: every message may go at once.
pub(super) struct Pace {
    rate: Option<u32>,
    started: Instant,
    sent: u64,
}

impl Pace {
    /// A pace of `rate` messages a second (`None` or 0: none) from `now`.
    pub(super) fn new(rate: Option<u32>, now: Instant) -> Pace {
        Pace {
            rate: rate.filter(|r| *r > 0),
            started: now,
            sent: 0,
        }
    }

    /// How many of `want` messages may go now. The allowance banked while idle is at most one
    /// request's (`rate` messages, at most 10): an hour without messages let the next 360,000
    /// of a rate of 100 go at full speed. The pace restarts from now with that much due.
    pub(super) fn allowed(&mut self, want: usize, now: Instant) -> usize {
        let Some(rate) = self.rate else {
            return want;
        };
        let r = f64::from(rate);
        let burst = u64::from(rate).min(REQUEST);
        if self.due(now) > self.sent + burst {
            // `burst` due now: `burst - 1` messages' time behind us (and one more as the pace
            // always allows).
            let behind = Duration::from_secs_f64((burst - 1) as f64 / r);
            self.started = now.checked_sub(behind).unwrap_or(now);
            self.sent = 0;
        }
        want.min(self.due(now).saturating_sub(self.sent) as usize)
    }

    /// Messages due by `now`: one at the start, then `rate` a second.
    fn due(&self, now: Instant) -> u64 {
        let rate = f64::from(self.rate.unwrap_or(0));
        (now.saturating_duration_since(self.started).as_secs_f64() * rate) as u64 + 1
    }

    /// `n` messages went to the workers.
    pub(super) fn sent(&mut self, n: u64) {
        self.sent += n;
    }

    /// When the next message may go, if that is still to come (and there is a rate): an
    /// allowance already due is held back, if at all, by something with a wake-up of its own
    /// (a reply awaited with every request slot taken, the remote's backoff), and a past
    /// deadline made those waits zero waits (a spin).
    pub(super) fn next(&self, now: Instant) -> Option<Instant> {
        let rate = self.rate?;
        let t = self.started + Duration::from_secs_f64(self.sent as f64 / f64::from(rate));
        (t > now).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_rate_everything_goes_and_nothing_waits() {
        let now = Instant::now();
        let mut p = Pace::new(None, now);
        assert_eq!(p.allowed(10, now), 10);
        p.sent(10);
        assert_eq!(p.next(now), None);
        assert_eq!(Pace::new(Some(0), now).allowed(10, now), 10);
    }

    /// `rate` a second, one at the start; an idle hour banks one request's worth, not
    /// 360,000 messages; the next moment is given only while it is still to come.
    #[test]
    fn a_rate_paces_and_banks_at_most_a_request() {
        let t0 = Instant::now();
        let mut p = Pace::new(Some(100), t0);
        assert_eq!(p.allowed(10, t0), 1);
        p.sent(1);
        assert_eq!(p.allowed(10, t0), 0);
        assert_eq!(p.next(t0), Some(t0 + Duration::from_millis(10)));
        let t1 = t0 + Duration::from_millis(55);
        assert_eq!(p.allowed(10, t1), 5);
        assert_eq!(
            p.next(t1 + Duration::from_secs(1)),
            None,
            "a past moment is no deadline"
        );
        let hour = t0 + Duration::from_secs(3600);
        let banked = p.allowed(1_000_000, hour);
        assert!((9..=10).contains(&banked), "{banked}");
        p.sent(banked as u64);
        assert_eq!(p.allowed(10, hour), 0);
        // A rate below one request banks its own count.
        let mut slow = Pace::new(Some(3), t0);
        let n = slow.allowed(10, t0 + Duration::from_secs(3600));
        assert!((2..=3).contains(&n), "{n}");
    }
}
