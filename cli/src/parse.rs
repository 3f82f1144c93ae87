//! Parsers for command-line values: durations, byte sizes, rates, modes, size classes,
//! message attributes, and base64 for binary attribute values.

use std::time::Duration;

/// A duration: a number with an optional unit, `ms`, `s` (the default, SQS's unit), `m`, `h`
/// or `d`: `30`, `30s`, `500ms`, `5m`, `12h`, `4d`.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        // SQS's unit: seconds.
        let n: u64 = t
            .parse()
            .map_err(|_| format!("{s:?}: the number is too large"))?;
        return n
            .checked_mul(1_000)
            .map(Duration::from_millis)
            .ok_or_else(|| format!("{s:?}: the duration is too long"));
    }
    humantime::parse_duration(t).map_err(|e| {
        format!("{s:?} is not a duration ({e}; use e.g. 30, 30s, 500ms, 5m, 1h 30m, 12h, 4d)")
    })
}

/// A receive's wait time (SQS's `WaitTimeSeconds`): a [`duration`] of at most 20 seconds, as
/// SQS takes it.
pub fn wait_time(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d > Duration::from_secs(20) {
        return Err(format!(
            "{s:?} is longer than 20s, the longest a receive waits (SQS's WaitTimeSeconds is 0-20)"
        ));
    }
    Ok(d)
}

/// A byte count with an optional binary suffix: `262144`, `256KiB`, `256K`, `1MiB`, `1M`.
pub fn bytes(s: &str) -> Result<u32, String> {
    let n = large_bytes(s)?;
    u32::try_from(n).map_err(|_| format!("{s:?} is too large"))
}

/// A byte count that may pass 4 GiB: as [`bytes`], with `GiB`/`G` and `TiB`/`T` too.
pub fn large_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count (use e.g. 262144, 256KiB, 1MiB)"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1024,
        "M" | "MiB" => 1024 * 1024,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        u => {
            return Err(format!(
                "{s:?}: unknown unit {u:?} (use KiB, MiB, GiB or TiB)"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// A listening address: `IP:PORT`, or `localhost:PORT` (the name every host resolves to a
/// loopback address, taken as 127.0.0.1; other names are refused: a name resolves to what
/// the resolver says at start, which may not be what the operator meant to expose).
pub fn listen(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{port:?} is not a port (0 to 65535)"))?;
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Err(format!(
        "{s:?} is not an address: give IP:PORT (127.0.0.1:9325, [::1]:9325) or localhost:PORT"
    ))
}

/// The address `serve` listens on: an IP address, or `localhost` (127.0.0.1; it was refused,
/// "invalid IP address syntax").
pub fn host(s: &str) -> Result<std::net::IpAddr, String> {
    if s.eq_ignore_ascii_case("localhost") {
        return Ok(std::net::IpAddr::from([127, 0, 0, 1]));
    }
    s.parse().map_err(|_| {
        format!(
            "{s:?} is not an address: give an IP address (127.0.0.1, ::1, 0.0.0.0) or localhost"
        )
    })
}

/// A count of at least one (`peek --max 0` read nothing and exited 1, "no messages").
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a count")),
    }
}

/// A rate in messages per second: `100` or `100/s`.
pub fn rate(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let t = t.strip_suffix("/s").unwrap_or(t);
    match t.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "{s:?} is not a rate (a positive number of messages per second, e.g. 100/s)"
        )),
    }
}

/// File permission bits in octal: `600`, `0600`, `0o600`.
pub fn mode(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let t = t.strip_prefix("0o").unwrap_or(t);
    u32::from_str_radix(t, 8).map_err(|_| format!("{s:?} is not an octal mode (e.g. 0600)"))
}

/// Explicit size classes, `(payload bytes, slots)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeClasses(pub Vec<(u32, u32)>);

/// Explicit size classes: `PAYLOAD:SLOTS,...`, payloads ascending, e.g. `192:1024,4096:64`
/// (payloads take the suffixes of [`bytes`]).
pub fn size_classes(s: &str) -> Result<SizeClasses, String> {
    s.split(',')
        .map(|c| {
            let (p, n) = c
                .split_once(':')
                .ok_or_else(|| format!("size class {c:?} is not PAYLOAD:SLOTS"))?;
            let slots = n
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("size class {c:?}: {n:?} is not a slot count"))?;
            Ok((bytes(p)?, slots))
        })
        .collect::<Result<_, String>>()
        .map(SizeClasses)
}

/// A message attribute given as `NAME=TYPE:VALUE`, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// Name.
    pub name: String,
    /// `String`, `Number` or `Binary`, optionally with a `.label` suffix.
    pub data_type: String,
    /// The value's bytes (decoded from base64 for a `Binary` type).
    pub value: Vec<u8>,
}

impl Attribute {
    /// Builds an attribute from its type and its text value (base64 for a `Binary` type).
    pub fn new(name: &str, data_type: &str, value: &str) -> Result<Attribute, String> {
        let base = data_type.split('.').next().unwrap_or("");
        let value = match base {
            "String" | "Number" => value.as_bytes().to_vec(),
            "Binary" => base64_decode(value)
                .ok_or_else(|| format!("attribute {name}: the Binary value is not base64"))?,
            _ => {
                return Err(format!(
                    "attribute {name}: type {data_type:?} is not String, Number or Binary (optionally with a .label)"
                ))
            }
        };
        Ok(Attribute {
            name: name.to_owned(),
            data_type: data_type.to_owned(),
            value,
        })
    }

    /// The library's borrowed form.
    pub fn as_message_attribute(&self) -> shmfifo::MessageAttribute<'_> {
        shmfifo::MessageAttribute {
            name: &self.name,
            data_type: &self.data_type,
            value: &self.value,
        }
    }
}

/// `NAME=TYPE:VALUE`, e.g. `color=String:red`, `n=Number:42`, `raw=Binary:aGk=`.
pub fn attribute(s: &str) -> Result<Attribute, String> {
    let (name, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("attribute {s:?} is not NAME=TYPE:VALUE (e.g. color=String:red)"))?;
    let (ty, value) = rest.split_once(':').ok_or_else(|| {
        format!("attribute {s:?} has no type: use NAME=TYPE:VALUE (e.g. {name}=String:{rest})")
    })?;
    Attribute::new(name, ty, value)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64 (padding optional, no whitespace); `None` if malformed.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = B64.iter().position(|&b| b == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A single leftover sextet cannot come from whole bytes.
    (bits < 6).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `serve --host localhost` was refused ("invalid IP address syntax").
    #[test]
    fn host_takes_addresses_and_localhost() {
        assert_eq!(host("localhost").unwrap().to_string(), "127.0.0.1");
        assert_eq!(host("::1").unwrap().to_string(), "::1");
        assert_eq!(host("0.0.0.0").unwrap().to_string(), "0.0.0.0");
        assert!(host("example.com").unwrap_err().contains("localhost"));
    }

    /// `metrics --listen localhost:9325` was refused ("invalid socket address syntax").
    #[test]
    fn listen_takes_addresses_and_localhost() {
        assert_eq!(
            listen("127.0.0.1:9325").unwrap().to_string(),
            "127.0.0.1:9325"
        );
        assert_eq!(listen("[::1]:0").unwrap().to_string(), "[::1]:0");
        assert_eq!(
            listen("localhost:9325").unwrap().to_string(),
            "127.0.0.1:9325"
        );
        for bad in [
            "localhost",
            "localhost:x",
            "localhost:70000",
            "example.com:80",
            "",
        ] {
            assert!(listen(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_take_sqs_seconds_and_units() {
        let ms = |v| Duration::from_millis(v);
        assert_eq!(duration("30"), Ok(ms(30_000)));
        assert_eq!(duration("30s"), Ok(ms(30_000)));
        assert_eq!(duration("500ms"), Ok(ms(500)));
        assert_eq!(duration("5m"), Ok(ms(300_000)));
        assert_eq!(duration("12h"), Ok(ms(43_200_000)));
        assert_eq!(duration("4d"), Ok(ms(345_600_000)));
        assert_eq!(duration("0"), Ok(ms(0)));
        // humantime's syntax: compound durations and every unit it knows.
        assert_eq!(duration("1h 30m"), Ok(ms(5_400_000)));
        assert_eq!(duration("2min 5s"), Ok(ms(125_000)));
        assert_eq!(duration("1w"), Ok(ms(604_800_000)));
        assert_eq!(duration("1.5s"), Ok(ms(1_500)));
        for bad in ["", "s", "-1", "10 parsecs"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn byte_counts_rates_modes_classes() {
        assert_eq!(bytes("262144"), Ok(262_144));
        assert_eq!(bytes("256KiB"), Ok(262_144));
        assert_eq!(bytes("1MiB"), Ok(1_048_576));
        assert!(bytes("4GiB").is_err());
        assert!(bytes("5000MiB").is_err());
        assert_eq!(rate("100/s"), Ok(100));
        assert_eq!(rate("7"), Ok(7));
        assert!(rate("0").is_err());
        assert!(rate("fast").is_err());
        assert_eq!(mode("0600"), Ok(0o600));
        assert_eq!(mode("0o644"), Ok(0o644));
        assert!(mode("999").is_err());
        assert_eq!(
            size_classes("192:1024, 4KiB:16"),
            Ok(SizeClasses(vec![(192, 1024), (4096, 16)]))
        );
        assert!(size_classes("192").is_err());
    }

    #[test]
    fn attributes_need_a_type() {
        let a = attribute("color=String:red:dark").unwrap();
        assert_eq!((a.name.as_str(), a.data_type.as_str()), ("color", "String"));
        assert_eq!(a.value, b"red:dark");
        let b = attribute("raw=Binary.png:aGk=").unwrap();
        assert_eq!(b.value, b"hi");
        assert!(attribute("color=red").is_err());
        assert!(attribute("color").is_err());
        assert!(attribute("x=Float:1").is_err());
        assert!(attribute("x=Binary:!!").is_err());
    }

    #[test]
    fn base64_round_trips() {
        for data in [
            &b""[..],
            b"f",
            b"fo",
            b"foo",
            b"foob",
            b"fooba",
            b"foobar",
            &[0, 255, 7],
        ] {
            let e = base64_encode(data);
            assert_eq!(base64_decode(&e).as_deref(), Some(data), "{e}");
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_decode("Zg"), Some(b"f".to_vec()));
        assert_eq!(base64_decode("Z"), None);
    }
}
