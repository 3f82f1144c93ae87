//! SQS's `RedrivePolicy` JSON (X1), read with a bounded cursor: no recursion, every escape.

use super::RedrivePolicy;

/// Parses SQS's `RedrivePolicy` JSON (X1): an object with `deadLetterTargetArn` and
/// `maxReceiveCount` (a JSON number or a string of digits). Other keys are rejected. The
/// target is a queue name or path, or an SQS queue ARN `arn:PARTITION:sqs:REGION:ACCOUNT:NAME`,
/// which names the local queue NAME (so a policy copied from AWS works). Strings take every
/// JSON escape. Returns a reason on error.
///
/// ```
/// let p = shmfifo::parse_redrive_policy(
///     r#"{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:123456789012:orders-dlq.fifo","maxReceiveCount":"5"}"#,
/// )?;
/// assert_eq!((p.dead_letter_queue.as_str(), p.max_receive_count), ("orders-dlq.fifo", 5));
/// # Ok::<(), String>(())
/// ```
pub fn parse_redrive_policy(json: &str) -> std::result::Result<RedrivePolicy, String> {
    let mut p = JsonCursor {
        s: json.as_bytes(),
        i: 0,
    };
    let (mut target, mut count) = (None, None);
    p.expect(b'{')?;
    if !p.eat(b'}') {
        loop {
            let key = p.string()?;
            p.expect(b':')?;
            match key.as_str() {
                "deadLetterTargetArn" => target = Some(p.string()?),
                "maxReceiveCount" => {
                    let v = if p.peek() == Some(b'"') {
                        p.string()?
                    } else {
                        p.digits()?
                    };
                    count = Some(
                        v.parse::<u32>()
                            .map_err(|_| format!("maxReceiveCount {v:?} is not an integer"))?,
                    );
                }
                other => return Err(format!("unknown key {other:?} in RedrivePolicy")),
            }
            if p.eat(b'}') {
                break;
            }
            p.expect(b',')?;
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err("trailing characters after the JSON object".into());
    }
    let target = target.ok_or("deadLetterTargetArn is missing")?;
    Ok(RedrivePolicy {
        dead_letter_queue: queue_of_arn(&target)?.unwrap_or(target),
        max_receive_count: count.ok_or("maxReceiveCount is missing")?,
    })
}

/// The queue name of an SQS queue ARN (`arn:PARTITION:sqs:REGION:ACCOUNT:NAME`), `None` for a
/// target that is not an ARN; an ARN of another service, or without a name, is an error.
fn queue_of_arn(target: &str) -> std::result::Result<Option<String>, String> {
    let Some(rest) = target.strip_prefix("arn:") else {
        return Ok(None);
    };
    let parts: Vec<&str> = rest.splitn(5, ':').collect();
    match parts.as_slice() {
        [_, "sqs", _, _, name] if !name.is_empty() && !name.contains([':', '/']) => {
            Ok(Some((*name).to_owned()))
        }
        _ => Err(format!(
            "deadLetterTargetArn {target:?} is not an SQS queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME)"
        )),
    }
}

/// A cursor over a flat JSON object of strings and numbers.
struct JsonCursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonCursor<'_> {
    /// JSON's whitespace: space, tab, line feed, carriage return (not a form feed, which
    /// `is_ascii_whitespace` would pass: a policy serde_json refuses must not be read here as
    /// something else, `shmfifo serve` checks policies with serde_json).
    fn ws(&mut self) {
        while matches!(self.s.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, self.i))
        }
    }
    fn digits(&mut self) -> std::result::Result<String, String> {
        self.ws();
        let start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        if start == self.i {
            return Err(format!("expected a number at byte {start}"));
        }
        // JSON writes no leading zero (serde_json refuses `007`; as a string it is digits).
        if self.i - start > 1 && self.s[start] == b'0' {
            return Err(format!("a number with a leading zero at byte {start}"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }
    /// Four hex digits of a `\u` escape at `at`.
    fn hex4(&self, at: usize) -> std::result::Result<u32, String> {
        // Four hex digits exactly (`from_str_radix` alone takes a sign: `\u+1e9`).
        let h = self
            .s
            .get(at..at + 4)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| format!("bad \\u escape at byte {at}"))?;
        Ok(h)
    }
    /// A JSON string, with every JSON escape (`\uXXXX` with surrogate pairs too).
    fn string(&mut self) -> std::result::Result<String, String> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            match self.s.get(self.i).copied() {
                None => return Err("unterminated string".into()),
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).map_err(|_| "string is not UTF-8".into());
                }
                Some(b'\\') => {
                    let simple = |c: u8| match c {
                        b'"' | b'\\' | b'/' => Some(c),
                        b'b' => Some(8),
                        b'f' => Some(12),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        _ => None,
                    };
                    match self.s.get(self.i + 1).copied() {
                        Some(b'u') => {
                            let mut c = self.hex4(self.i + 2)?;
                            self.i += 6;
                            if (0xD800..0xDC00).contains(&c) {
                                // A high surrogate: its low half must follow as `\uXXXX`.
                                let lo = match self.s.get(self.i..self.i + 2) {
                                    Some(b"\\u") => self.hex4(self.i + 2)?,
                                    _ => return Err("unpaired surrogate in a \\u escape".into()),
                                };
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err("unpaired surrogate in a \\u escape".into());
                                }
                                c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                                self.i += 6;
                            }
                            let ch =
                                char::from_u32(c).ok_or("unpaired surrogate in a \\u escape")?;
                            let mut b = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                            continue;
                        }
                        Some(c) if simple(c).is_some() => out.extend(simple(c)),
                        _ => return Err(format!("bad escape at byte {}", self.i)),
                    }
                    self.i += 2;
                }
                // JSON strings hold no raw control character (escaped, they may).
                Some(c) if c < 0x20 => {
                    return Err(format!(
                        "a control character in a string at byte {}",
                        self.i
                    ))
                }
                Some(c) => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }
}
