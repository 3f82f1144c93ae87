//! Queue URLs (`http://HOST:PORT/ACCOUNT/NAME`, naming the listening address, or, where serve
//! listens on every address, the host each request named) and the listings that answer them.

use serde_json::{Map, Value};

use super::{access_denied, int_param, str_param, valid_name, Queues, Res, ACCOUNT, MAX_LISTED};
use crate::access::Identity;
use crate::protocol::ApiError;

impl Queues {
    /// The URL of queue `name` at the listening address.
    pub(super) fn url(&self, name: &str) -> String {
        format!("{}{name}", self.url_prefix)
    }

    /// A listing's page (ListQueues, ListDeadLetterSourceQueues): `MaxResults` (1–1,000) and
    /// `NextToken` (the last name of the page before), read and checked.
    pub(super) fn page_params(p: &Map<String, Value>) -> Result<(Option<i64>, &str), ApiError> {
        let max = int_param(p, "MaxResults")?;
        if max.is_some_and(|m| !(1..=1000).contains(&m)) {
            return Err(ApiError::invalid(
                "MaxResults",
                "must be between 1 and 1000",
            ));
        }
        Ok((max, str_param(p, "NextToken")?.unwrap_or("")))
    }

    /// The answer of a listing of `names` (sorted, past the token) under `key`, as URLs: at
    /// most `max` and a `NextToken` where more are left; without `MaxResults`, as SQS, at most
    /// 1,000 and no token (a directory of a million names answers 1,000 of them, not a
    /// response of tens of megabytes). An empty page omits `key` unless `always`.
    pub(super) fn page(
        &self,
        mut names: Vec<String>,
        max: Option<i64>,
        key: &str,
        always: bool,
    ) -> Res {
        let mut out = Map::new();
        match max {
            Some(m) => {
                if names.len() > m as usize {
                    names.truncate(m as usize);
                    out.insert(
                        "NextToken".into(),
                        Value::String(names[names.len() - 1].clone()),
                    );
                }
            }
            None => names.truncate(MAX_LISTED),
        }
        if always || !names.is_empty() {
            out.insert(
                key.into(),
                Value::Array(names.iter().map(|n| Value::String(self.url(n))).collect()),
            );
        }
        Ok(out)
    }

    pub(super) fn list_queues(&self, p: &Map<String, Value>, who: &Identity) -> Res {
        let prefix = str_param(p, "QueueNamePrefix")?.unwrap_or("");
        let (max, after) = Self::page_params(p)?;
        let dir = self.reachable("the queue directory", who)?;
        if !who.may_list(dir.meta()) {
            return Err(access_denied("the queue directory", "list it"));
        }
        // Only the queues the caller may use: the names of others are not theirs to learn.
        let mut names: Vec<String> = std::fs::read_dir(dir.dir_path())
            .map_err(|e| ApiError::from(shmfifo::Error::Io(e)))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| valid_name(n) && n.starts_with(prefix) && n.as_str() > after)
            .filter(|n| {
                dir.entry(n)
                    .is_ok_and(|m| m.is_some_and(|m| m.is_file() && who.may_open(&m)))
            })
            .collect();
        names.sort();
        self.page(names, max, "QueueUrls", false)
    }

    /// Rewrites the queue URLs of an answer (`QueueUrl`, `QueueUrls`, `queueUrls`) to name
    /// `host` instead of the listening address.
    pub(super) fn rehost(&self, answer: &mut Map<String, Value>, host: &str) {
        let prefix = format!("http://{host}/{ACCOUNT}/");
        let swap = |v: &mut Value| {
            if let Value::String(url) = v {
                if let Some(name) = url.strip_prefix(&self.url_prefix) {
                    *url = format!("{prefix}{name}");
                }
            }
        };
        for (key, v) in answer.iter_mut() {
            match (key.as_str(), v) {
                ("QueueUrl", v) => swap(v),
                ("QueueUrls" | "queueUrls", Value::Array(urls)) => urls.iter_mut().for_each(swap),
                _ => {}
            }
        }
    }
}

/// Whether a `Host` header is a plain `host[:port]` (a name, an IPv4 address or a bracketed
/// IPv6 one, of at most 255 bytes) that a URL may carry as it is.
pub(super) fn plain_host(h: &str) -> bool {
    if h.is_empty() || h.len() > 255 {
        return false;
    }
    // `[v6]` or `[v6]:port`; else `name` or `name:port` with one colon at most.
    let (host, port) = match h.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((v6, after)) if v6.parse::<std::net::Ipv6Addr>().is_ok() => match after {
                "" => return true,
                p => match p.strip_prefix(':') {
                    Some(port) => ("v6", port),
                    None => return false,
                },
            },
            _ => return false,
        },
        None => match h.split_once(':') {
            Some((host, port)) => (host, port),
            None => (h, "0"),
        },
    };
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && port.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(addr: &str) -> Queues {
        Queues::new(std::env::temp_dir(), addr.parse().unwrap(), 0)
    }

    /// A serve on `0.0.0.0` answered URLs of `0.0.0.0`, which no client can reach: the URLs of
    /// an answer name the host the request named, in every key that carries URLs.
    #[test]
    fn urls_name_the_requested_host_where_serve_listens_on_every_address() {
        let q = queues("0.0.0.0:9324");
        let mut answer = Map::new();
        answer.insert("QueueUrl".into(), Value::String(q.url("a.fifo")));
        answer.insert(
            "QueueUrls".into(),
            Value::Array(vec![
                Value::String(q.url("a.fifo")),
                Value::String(q.url("b.fifo")),
            ]),
        );
        answer.insert(
            "queueUrls".into(),
            Value::Array(vec![Value::String(q.url("c.fifo"))]),
        );
        answer.insert("Other".into(), Value::String(q.url("d.fifo")));
        q.rehost(&mut answer, "queues.example:9324");
        let at = |n: &str| Value::String(format!("http://queues.example:9324/{ACCOUNT}/{n}"));
        assert_eq!(answer["QueueUrl"], at("a.fifo"));
        assert_eq!(
            answer["QueueUrls"],
            Value::Array(vec![at("a.fifo"), at("b.fifo")])
        );
        assert_eq!(answer["queueUrls"], Value::Array(vec![at("c.fifo")]));
        // Only the keys of URLs.
        assert_eq!(answer["Other"], Value::String(q.url("d.fifo")));
        assert!(q.any_host && !queues("127.0.0.1:9324").any_host && queues("[::]:1").any_host);
    }

    /// A `Host` header is put into a URL only if it is a plain `host[:port]`.
    #[test]
    fn only_a_plain_host_names_urls() {
        let ok = [
            "10.0.0.5:9324",
            "queues.example",
            "[fe80::1]:9324",
            "[::1]",
            "localhost",
        ];
        for h in ok {
            assert!(plain_host(h), "{h}");
        }
        let long = "a".repeat(256);
        let bad = [
            "",
            "a/b",
            "user@host",
            "h ost",
            "h\"o",
            "x?y",
            "fe80::1",
            "h:1:2",
            "h:port",
            "[h]:1",
            "[::1]x",
            "h]",
            ":80",
            long.as_str(),
        ];
        for h in bad {
            assert!(!plain_host(h), "{h}");
        }
    }
}
