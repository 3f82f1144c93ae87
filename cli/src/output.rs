//! Human-readable output: aligned tables and key/value blocks, durations, sizes, times; and
//! writing to stdout without dying of a closed pipe.

use std::io::Write;
use std::time::Duration;

/// A table: a header row and rows of cells, columns aligned; a column whose cells are all
/// numbers (or `-`) is right-aligned.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table, indented by `indent` spaces, one line per row.
    pub fn render(&self, indent: usize) -> String {
        let cols = self.header.len();
        let mut width = vec![0; cols];
        let mut numeric = vec![true; cols];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                numeric[i] &= is_number(c);
            }
        }
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = " ".repeat(indent);
            for (i, c) in r.iter().enumerate().take(cols) {
                let pad = width[i] - c.chars().count();
                if i > 0 {
                    line.push_str("  ");
                }
                if numeric[i] {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(c);
                } else {
                    line.push_str(c);
                    if i + 1 < cols {
                        line.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

fn is_number(s: &str) -> bool {
    s == "-"
        || (!s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == ',' || c == '%'))
}

/// Key/value lines with the values aligned, indented by `indent` spaces. A multi-line value's
/// later lines are indented to the value column.
pub fn kv(pairs: &[(&str, String)], indent: usize) -> String {
    let w = pairs
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (k, v) in pairs {
        let pad = " ".repeat(indent + w + 2);
        let mut lines = v.split('\n');
        out.push_str(&format!(
            "{}{k:<w$}  {}",
            " ".repeat(indent),
            lines.next().unwrap_or("")
        ));
        for l in lines {
            out.push('\n');
            out.push_str(&pad);
            out.push_str(l);
        }
        // Keep the line clean when the value is empty.
        let trimmed = out.trim_end_matches(' ').len();
        out.truncate(trimmed);
        out.push('\n');
    }
    out
}

/// A duration in the largest unit that shows it exactly: `30s`, `500ms`, `5m`, `12h`, `4d`.
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    for (unit, per) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms % per == 0 {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

/// A byte count in the largest binary unit, with one decimal where it is not whole.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64;
    let mut unit = "B";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    let t = format!("{v:.1}");
    format!("{} {unit}", t.strip_suffix(".0").unwrap_or(&t))
}

/// A number with thousands separators.
pub fn num(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n messages` (`1 message`), `n` with thousands separators.
pub fn messages(n: u64) -> String {
    format!("{} message{}", num(n), if n == 1 { "" } else { "s" })
}

/// Milliseconds since the Unix epoch as UTC `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn timestamp(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    )
}

/// Milliseconds since the epoch and, after it, the UTC time: `1714000000123 (2024-...Z)`.
pub fn ms_and_time(ms: u64) -> String {
    format!("{ms} ({})", timestamp(ms))
}

/// Writes to stdout. A closed pipe (`shmfifo peek q | head -1`) is not an error: the rest
/// of the output is dropped. Returns `false` then.
pub fn out(s: &str) -> bool {
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes()).and_then(|()| o.flush()).is_ok()
}

/// Writes a JSON document on one line... or pretty-printed: `pretty` for whole-command
/// documents, one line for streams (`watch`).
pub fn json(v: &serde_json::Value, pretty: bool) -> bool {
    let mut s = if pretty {
        serde_json::to_string_pretty(v)
    } else {
        serde_json::to_string(v)
    }
    .unwrap_or_default();
    s.push('\n');
    out(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_right_align_numbers() {
        let mut t = Table::new(&["NAME", "VISIBLE", "STATUS"]);
        t.row(vec!["a".into(), "5".into(), "ok".into()]);
        t.row(vec!["longer".into(), "1,000".into(), "layout 4".into()]);
        assert_eq!(
            t.render(0),
            "NAME    VISIBLE  STATUS\na             5  ok\nlonger    1,000  layout 4\n"
        );
    }

    #[test]
    fn kv_aligns_values_and_continues_lines() {
        assert_eq!(
            kv(&[("a", "1".into()), ("long", "x\ny".into())], 2),
            "  a     1\n  long  x\n        y\n"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(duration(Duration::from_secs(30)), "30s");
        assert_eq!(duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(duration(Duration::from_secs(345_600)), "4d");
        assert_eq!(duration(Duration::from_secs(300)), "5m");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(262_144), "256 KiB");
        assert_eq!(size(1_572_864), "1.5 MiB");
        assert_eq!(size(1_049_600), "1 MiB");
        assert_eq!(num(1_234_567), "1,234,567");
        assert_eq!(num(12), "12");
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(timestamp(1_714_000_000_000), "2024-04-24T23:06:40.000Z");
    }
}
