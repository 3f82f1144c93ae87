//! Bodies of the three request-parser fuzz targets of `shmfifo serve`, shared by
//! the cargo-fuzz binaries (`fuzz/fuzz_targets/serve_*.rs`) and by the replay test
//! `serve/tests/fuzz_regressions.rs` (both include this file with `#[path = ...] mod serve;`).
//!
//! * [`serve_query`]: the input is a query-protocol form body (`protocol::from_query`,
//!   `protocol::form_pairs`); the answer and error writers (`to_xml`, `error_xml`,
//!   `error_json`) are driven with what was parsed.
//! * [`serve_json`]: the input is `X-Amz-Target` and a JSON-protocol body
//!   (`protocol::from_json`).
//! * [`serve_sigv4`]: the input becomes a request checked by `sigv4::KeyPair::check`, either
//!   built raw from the input (then no key the input could know signed it: the check must
//!   refuse it), or signed here with a key from the input by an independent SigV4 signer (then
//!   the check must accept it, and refuse every tampered copy).
//!
//! The oracles: no call panics (nothing here catches panics), and the properties asserted
//! below hold. A hang is libFuzzer's `-timeout` (the replay test's `HANG`).
//!
//! `SHMFIFO_FUZZ_TRACE=1` prints what each input became and the parser's answer to stderr.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use shmfifo_serve::protocol::{self, ApiError, MAX_QUERY_DEPTH, MAX_QUERY_KEY, MAX_QUERY_PARAMS};
use shmfifo_serve::sigv4::{KeyPair, Signed, MAX_SKEW};

/// Whether `SHMFIFO_FUZZ_TRACE` is set.
fn tracing() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("SHMFIFO_FUZZ_TRACE").is_some_and(|v| v != "0"))
}

macro_rules! trace {
    ($($t:tt)*) => {
        if tracing() {
            eprintln!($($t)*);
        }
    };
}

/// The request id answers are written with: every character `esc` must escape.
pub const REQUEST_ID: &str = "req-<&>\"'\r-id";

// ---------------------------------------------------------------------------------------------
// serve_query

/// A query-protocol form body: `from_query` and `form_pairs` return `Ok` or `Err` and agree;
/// the pairs keep the bounds, decode as the `form_urlencoded` crate decodes them, and survive
/// re-encoding; the parameters hold only text from the pairs, at most `MAX_QUERY_DEPTH` deep;
/// the XML written from them (or from the error) is well formed.
pub fn serve_query(data: &[u8]) {
    let pairs = protocol::form_pairs(data);
    let parsed = protocol::from_query(data);
    trace!("serve_query: {parsed:?}");
    match (&pairs, &parsed) {
        (Err(a), Err(b)) => {
            assert_eq!((&a.code, &a.message), (&b.code, &b.message));
            assert!(
                matches!(
                    a.code.as_str(),
                    "MalformedQueryString" | "InvalidMessageContents"
                ),
                "form_pairs: unexpected error {a:?}"
            );
            assert!(a.sender && a.status == 400, "{a:?}");
        }
        (Err(a), Ok(_)) => panic!("form_pairs refused ({a:?}) what from_query accepted"),
        (Ok(p), Err(e)) => {
            assert!(
                p.iter().all(|(k, _)| k != "Action"),
                "from_query refused a form with an Action: {e:?}"
            );
            assert_eq!(e.code, "MissingParameter", "{e:?}");
        }
        (Ok(p), Ok((action, params))) => {
            let last = p.iter().rev().find(|(k, _)| k == "Action").map(|(_, v)| v);
            assert_eq!(
                last,
                Some(action),
                "the action is not the last Action pair's value"
            );
            check_params(p, params);
            check_answer_xml(action, params);
        }
    }
    if let Ok(p) = &pairs {
        check_pairs(data, p);
    }
    if let Err(e) = &parsed {
        check_error(e);
    }
}

/// The pairs' bounds, the `form_urlencoded` crate's reading, and a re-encoding round trip.
fn check_pairs(form: &[u8], p: &[(String, String)]) {
    assert!(p.len() <= MAX_QUERY_PARAMS, "{} pairs", p.len());
    for (k, _) in p {
        assert!(k.len() <= MAX_QUERY_KEY, "a name of {} bytes", k.len());
        assert!(k.split('.').count() <= MAX_QUERY_DEPTH, "{k}: too deep");
    }
    // The decoding is documented as the form_urlencoded crate's (whose decoding is lossy:
    // where form_pairs accepted, everything was UTF-8, so the two must agree exactly).
    let theirs: Vec<(String, String)> = form_urlencoded::parse(form)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    assert_eq!(
        p,
        &theirs[..],
        "form_pairs and form_urlencoded read the form differently"
    );
    // Encoded again (every byte but the unreserved ones escaped), the pairs read back as they
    // are: nothing in the decoding depends on how a byte was written.
    let again: Vec<String> = p
        .iter()
        .map(|(k, v)| format!("{}={}", uri_encode(k, false), uri_encode(v, false)))
        .collect();
    match protocol::form_pairs(again.join("&").as_bytes()) {
        Ok(back) => assert_eq!(p, &back[..], "re-encoded pairs read back differently"),
        Err(e) => panic!("re-encoded pairs refused: {e:?}"),
    }
}

/// The parameters hold text from the pairs only (numbers parsed from it), the names the
/// parser drops are dropped, and the tree is at most [`MAX_QUERY_DEPTH`] deep.
fn check_params(p: &[(String, String)], params: &Map<String, Value>) {
    let values: HashSet<&str> = p.iter().map(|(_, v)| v.as_str()).collect();
    fn walk(v: &Value, values: &HashSet<&str>) {
        match v {
            Value::String(s) => assert!(
                s.is_empty() || values.contains(s.as_str()),
                "parameter text {s:?} is no pair's value"
            ),
            Value::Number(n) => assert!(
                values
                    .iter()
                    .any(|v| v.trim().parse::<i64>().ok() == n.as_i64()),
                "number {n} parsed from no pair's value"
            ),
            Value::Null => {}
            Value::Bool(b) => panic!("a boolean {b} from a form"),
            Value::Array(a) => a.iter().for_each(|v| walk(v, values)),
            Value::Object(m) => m.values().for_each(|v| walk(v, values)),
        }
    }
    for (k, v) in params {
        for dropped in ["X-Amz-", "AWSAccessKeyId", "Signature"] {
            assert!(!k.starts_with(dropped), "parameter {k} should be dropped");
        }
        walk(v, &values);
    }
    let depth = 1 + params.values().map(depth).max().unwrap_or(0);
    assert!(
        depth <= MAX_QUERY_DEPTH,
        "parameters {depth} deep from names of at most {MAX_QUERY_DEPTH} parts"
    );
}

/// Nesting of containers in `v` (a scalar is 0).
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Whether `s` can stand as an element name as `to_xml` writes it (unescaped): the server
/// writes only its own names there (actions it serves, members of its answers).
fn name_like(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_alphabetic() || f == '_')
        && c.all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

fn names_like(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.iter().all(names_like),
        Value::Object(m) => m.iter().all(|(k, v)| name_like(k) && names_like(v)),
        _ => true,
    }
}

/// `to_xml` of the parameters as an answer: always written; well formed with its request id
/// intact wherever the element names are names.
fn check_answer_xml(action: &str, params: &Map<String, Value>) {
    let x = protocol::to_xml(action, params, REQUEST_ID);
    assert!(x.starts_with("<?xml"), "{x}");
    if !name_like(action) || !params.iter().all(|(k, v)| name_like(k) && names_like(v)) {
        trace!("serve_query: names that are no XML names: the answer's XML is not checked");
        return;
    }
    let doc = xml(&x).unwrap_or_else(|why| panic!("to_xml wrote malformed XML ({why}): {x}"));
    assert_eq!(doc.root, format!("{action}Response"), "{x}");
    assert_eq!(doc.text_of("RequestId"), Some(REQUEST_ID), "{x}");
    assert_eq!(
        x.contains(&format!("<{action}Result>")),
        !params.is_empty(),
        "{x}"
    );
}

/// Whether XML 1.0 can carry `c` (its `Char` production).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// An error as both protocols write it: well formed, its code and message intact.
fn check_error(e: &ApiError) {
    assert!(!e.code.is_empty(), "{e:?}");
    assert!((400..600).contains(&e.status), "{e:?}");
    let x = protocol::error_xml(e, REQUEST_ID);
    let doc = xml(&x).unwrap_or_else(|why| panic!("error_xml wrote malformed XML ({why}): {x}"));
    assert_eq!(doc.root, "ErrorResponse", "{x}");
    // XML 1.0 cannot carry most control characters: they are written as U+FFFD.
    assert!(
        !x.chars().any(|c| !xml_char(c)),
        "error_xml wrote a character XML cannot carry: {x:?}"
    );
    let carried = |t: &str| -> String {
        t.chars()
            .map(|c| if xml_char(c) { c } else { '\u{FFFD}' })
            .collect()
    };
    assert_eq!(
        doc.text_of("Code").map(str::to_owned),
        Some(carried(&e.code)),
        "{x}"
    );
    assert_eq!(
        doc.text_of("Message").map(str::to_owned),
        Some(carried(&e.message)),
        "{x}"
    );
    assert_eq!(
        doc.text_of("Type"),
        Some(if e.sender { "Sender" } else { "Receiver" })
    );
    assert_eq!(doc.text_of("RequestId"), Some(REQUEST_ID), "{x}");
    let j = protocol::error_json(e);
    let v: Value = serde_json::from_str(&j).unwrap_or_else(|err| panic!("error_json: {err}: {j}"));
    assert_eq!(v["message"].as_str(), Some(e.message.as_str()), "{j}");
    assert_eq!(
        v["__type"]
            .as_str()
            .map(|t| t.starts_with("com.amazonaws.sqs#")),
        Some(true),
        "{j}"
    );
}

/// What [`xml`] read: the root element's name and each element's text (unescaped) by name
/// (the last element of a name wins), for elements holding text only.
struct Doc {
    root: String,
    texts: Vec<(String, String)>,
}

impl Doc {
    fn text_of(&self, name: &str) -> Option<&str> {
        self.texts
            .iter()
            .rfind(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
    }
}

/// A small checker of the XML the server writes: the declaration, one root element, tags
/// that nest and close, attributes quoted, text with no `<`, `>` or quote unescaped and `&`
/// only in the entities `esc` writes.
fn xml(s: &str) -> Result<Doc, String> {
    let mut rest = s
        .strip_prefix("<?xml version=\"1.0\"?>")
        .ok_or("no XML declaration")?;
    let mut stack: Vec<&str> = Vec::new();
    let mut root = None;
    let mut texts = Vec::new();
    let mut text = String::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('<') {
            let end = after.find('>').ok_or("a tag is not closed")?;
            let tag = &after[..end];
            rest = &after[end + 1..];
            if tag.contains('<') {
                return Err(format!("'<' inside tag {tag:?}"));
            }
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
                if open != name {
                    return Err(format!("<{open}> closed by </{name}>"));
                }
                texts.push((name.to_owned(), std::mem::take(&mut text)));
                continue;
            }
            let (tag, empty) = match tag.strip_suffix('/') {
                Some(t) => (t, true),
                None => (tag, false),
            };
            let (name, attrs) = tag.split_once(' ').unwrap_or((tag, ""));
            if !name_like(name) {
                return Err(format!("element name {name:?}"));
            }
            for a in attrs.split(' ').filter(|a| !a.is_empty()) {
                let (k, v) = a.split_once('=').ok_or(format!("attribute {a:?}"))?;
                let quoted = v.len() >= 2 && v.starts_with('"') && v.ends_with('"');
                if !name_like(k) || !quoted || v[1..v.len() - 1].contains(['"', '<', '&']) {
                    return Err(format!("attribute {a:?}"));
                }
            }
            if stack.is_empty() {
                if root.is_some() {
                    return Err(format!("a second root element <{name}>"));
                }
                root = Some(name.to_owned());
            }
            text.clear();
            if empty {
                if stack.is_empty() {
                    return Err("an empty root".into());
                }
            } else {
                stack.push(name);
            }
        } else {
            let end = rest.find('<').unwrap_or(rest.len());
            let raw = &rest[..end];
            rest = &rest[end..];
            if stack.is_empty() {
                return Err(format!("text {raw:?} outside the root"));
            }
            text.push_str(&unescape(raw)?);
        }
    }
    if let Some(open) = stack.pop() {
        return Err(format!("<{open}> never closed"));
    }
    Ok(Doc {
        root: root.ok_or("no root element")?,
        texts,
    })
}

/// Text as `esc` writes it, read back.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(at) = rest.find(['&', '>', '"', '\'', '\r']) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let (entity, c) = [
            ("&amp;", '&'),
            ("&lt;", '<'),
            ("&gt;", '>'),
            ("&quot;", '"'),
            ("&apos;", '\''),
            ("&#xD;", '\r'),
        ]
        .into_iter()
        .find(|(e, _)| rest.starts_with(e))
        .ok_or_else(|| format!("unescaped {:?} in text {raw:?}", rest.chars().next()))?;
        out.push(c);
        rest = &rest[entity.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// serve_json

/// The `X-Amz-Target` a body without a target line is sent with.
const DEFAULT_TARGET: &str = "AmazonSQS.SendMessage";

/// `X-Amz-Target` up to the first newline (lossily UTF-8), then the body; without a newline,
/// all of the input is a body sent to [`DEFAULT_TARGET`]. `from_json` answers exactly as its
/// contract says: the action after `AmazonSQS.` (else `InvalidAction`), an empty map for a
/// blank body, the body's object, or `SerializationException`.
pub fn serve_json(data: &[u8]) {
    let (target, body) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (String::from_utf8_lossy(&data[..at]), &data[at + 1..]),
        None => (DEFAULT_TARGET.into(), data),
    };
    let got = protocol::from_json(&target, body);
    trace!("serve_json: {target:?}: {got:?}");
    match (target.strip_prefix("AmazonSQS."), &got) {
        (None, Ok(_)) => panic!("a target without AmazonSQS. accepted: {target:?}"),
        (None, Err(e)) => {
            assert_eq!((e.code.as_str(), e.status), ("InvalidAction", 400), "{e:?}");
        }
        (Some(action), got) => {
            let expected = if body.iter().all(u8::is_ascii_whitespace) {
                Some(Map::new())
            } else {
                match serde_json::from_slice::<Value>(body) {
                    Ok(Value::Object(m)) => Some(m),
                    _ => None,
                }
            };
            match (got, expected) {
                (Ok((a, params)), Some(m)) => {
                    assert_eq!(a, action);
                    assert!(
                        *params == m,
                        "from_json's parameters differ from the body's"
                    );
                    // serde_json's recursion limit (128) bounds every walk over them.
                    let d = 1 + params.values().map(depth).max().unwrap_or(0);
                    assert!(d <= 129, "parameters {d} deep");
                }
                (Err(e), None) => {
                    assert_eq!(
                        (e.code.as_str(), e.status),
                        ("SerializationException", 400),
                        "{e:?}"
                    );
                }
                (Ok(_), None) => panic!("from_json accepted a body that is no JSON object"),
                (Err(e), Some(_)) => panic!("from_json refused a JSON object: {e:?}"),
            }
        }
    }
    if let Err(e) = &got {
        check_error(e);
    }
}

// ---------------------------------------------------------------------------------------------
// serve_sigv4

/// The clock the checks run at: 2015-08-30T12:36:00Z plus up to 2^32 s (from the input).
const BASE: u64 = 1_440_938_160;
/// The access key the raw requests name by default (and the unknown key pair's).
const ACCESS_KEY: &str = "AKIDFUZZ";

/// A secret no input knows: random per process.
fn unknown_secret() -> &'static str {
    static S: OnceLock<String> = OnceLock::new();
    S.get_or_init(|| {
        let r = std::collections::hash_map::RandomState::new();
        let (mut a, mut b) = (r.build_hasher(), r.build_hasher());
        a.write_u8(1);
        b.write_u8(2);
        format!("{:016x}{:016x}", a.finish(), b.finish())
    })
}

/// Reads the input front to back; past its end, every byte is 0 (the plausible choice).
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn i16(&mut self) -> i16 {
        i16::from_le_bytes([self.byte(), self.byte()])
    }
    /// A length byte, then that many bytes, lossily UTF-8.
    fn text(&mut self) -> String {
        let n = self.byte() as usize;
        String::from_utf8_lossy(self.take(n)).into_owned()
    }
    /// [`Self::text`] with only the characters `keep` accepts, or `default` if none is left.
    fn token(&mut self, keep: fn(char) -> bool, default: &str) -> String {
        let t: String = self.text().chars().filter(|&c| keep(c)).collect();
        if t.is_empty() {
            default.to_owned()
        } else {
            t
        }
    }
    /// [`Self::text`] as an HTTP header value: bytes outside printable ASCII and tab mapped
    /// into it (what hyper's `to_str` passes).
    fn header_value(&mut self) -> String {
        let n = self.byte() as usize;
        self.take(n)
            .iter()
            .map(|&b| {
                if b == b'\t' || (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    (0x20 + b % 95) as char
                }
            })
            .collect()
    }
}

/// The input as a request checked by `KeyPair::check`: first byte even, a raw request (no key
/// pair the input knows signed it: refused, with one of SigV4's errors); odd, a request
/// signed here (accepted, and its tampered copies refused). See [`raw_request`] and
/// [`signed_request`] for the encodings.
pub fn serve_sigv4(data: &[u8]) {
    let mut input = Input(data);
    if input.byte() & 1 == 0 {
        raw_request(input);
    } else {
        signed_request(input);
    }
}

/// `YYYYMMDDTHHMMSSZ` of `secs` since the epoch (civil from days, Howard Hinnant's
/// algorithm, written here apart from the server's parser).
fn amz_date(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn at(secs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// RFC 3986 percent-encoding (unreserved characters kept, and `/` where `keep_slash`), with
/// upper-case hex, as AWS's SDKs write URLs.
fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The SigV4 error codes `check` may answer with.
const SIGV4_CODES: [&str; 6] = [
    "MissingAuthenticationToken",
    "IncompleteSignature",
    "InvalidClientTokenId",
    "RequestExpired",
    "SignatureDoesNotMatch",
    "XAmzContentSHA256Mismatch",
];

fn check_refused(e: &ApiError) {
    assert!(SIGV4_CODES.contains(&e.code.as_str()), "{e:?}");
    assert!(e.sender && matches!(e.status, 400 | 403), "{e:?}");
    check_error(e);
}

/// A raw request. Bytes, in order (each choice byte's first values are the plausible ones):
/// the clock (u32 LE, seconds after [`BASE`]); method (`POST`, `GET`, `PUT`, text); path
/// (`/`, a queue's path, text); query (none, `Action=ListQueues…`, text); the skew of
/// `X-Amz-Date` from the clock (i16 LE, seconds); a flags byte (bit 0: no `Host`, 1: no
/// `X-Amz-Date`, 2: no `Authorization`, 3: names capitalised, 4: a correct
/// `X-Amz-Content-SHA256`, 5: a text one, 6: `,` between the Authorization's parts without
/// a space, 7: its parts reversed); `X-Amz-Date` (formatted ×3, text); access key
/// ([`ACCESS_KEY`] ×3, text); the scope's date (the date's first 8 ×3, text); region
/// (`us-east-1` ×3, text); service (`sqs` ×3, text); 0–4 extra headers (name: `content-type`,
/// `x-amz-target`, `user-agent`, `host`, `x-amz-date`, text; value: text);
/// `SignedHeaders` (every name ×2, `host;x-amz-date`, text); `Signature` (32 bytes in hex ×3,
/// text); `Authorization` (formatted ×3, text); the rest is the body. Text is a length byte
/// and that many bytes.
fn raw_request(mut input: Input<'_>) {
    let now = BASE as i64 + i64::from(input.u32());
    let method = match input.byte() % 4 {
        0 => "POST".to_owned(),
        1 => "GET".to_owned(),
        2 => "PUT".to_owned(),
        _ => input.text(),
    };
    let path = match input.byte() % 3 {
        0 => "/".to_owned(),
        1 => "/123456789012/fuzz.fifo".to_owned(),
        _ => input.text(),
    };
    let query = match input.byte() % 3 {
        0 => String::new(),
        1 => "Action=ListQueues&Version=2012-11-05".to_owned(),
        _ => input.text(),
    };
    let signed_at = now + i64::from(input.i16());
    let flags = input.byte();
    let date_header = match input.byte() % 4 {
        3 => input.text(),
        _ => amz_date(signed_at),
    };
    let access_key = match input.byte() % 4 {
        3 => input.text(),
        _ => ACCESS_KEY.to_owned(),
    };
    let scope_date = match input.byte() % 4 {
        3 => input.text(),
        _ => date_header.get(..8).unwrap_or(&date_header).to_owned(),
    };
    let region = match input.byte() % 4 {
        3 => input.text(),
        _ => "us-east-1".to_owned(),
    };
    let service = match input.byte() % 4 {
        3 => input.text(),
        _ => "sqs".to_owned(),
    };
    let name = |n: &str| -> String {
        if flags & 8 == 0 {
            return n.to_owned();
        }
        n.split('-')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("-")
    };
    let mut headers: Vec<(String, String)> = Vec::new();
    if flags & 1 == 0 {
        headers.push((name("host"), "127.0.0.1:9324".to_owned()));
    }
    if flags & 2 == 0 {
        headers.push((name("x-amz-date"), date_header.clone()));
    }
    for _ in 0..input.byte() % 5 {
        let n = match input.byte() % 6 {
            0 => name("content-type"),
            1 => name("x-amz-target"),
            2 => name("user-agent"),
            3 => name("host"),
            4 => name("x-amz-date"),
            _ => input.text(),
        };
        let v = input.text();
        headers.push((n, v));
    }
    let signed_headers = match input.byte() % 4 {
        0 | 1 => {
            let mut names: Vec<String> = headers.iter().map(|(n, _)| n.to_lowercase()).collect();
            names.sort();
            names.dedup();
            names.join(";")
        }
        2 => "host;x-amz-date".to_owned(),
        _ => input.text(),
    };
    let signature = match input.byte() % 4 {
        3 => input.text(),
        _ => hex(input.take(32)),
    };
    let mut parts = [
        format!("Credential={access_key}/{scope_date}/{region}/{service}/aws4_request"),
        format!("SignedHeaders={signed_headers}"),
        format!("Signature={signature}"),
    ];
    if flags & 128 != 0 {
        parts.reverse();
    }
    let authorization = match input.byte() % 4 {
        3 => input.text(),
        _ => format!(
            "AWS4-HMAC-SHA256 {}",
            parts.join(if flags & 64 != 0 { "," } else { ", " })
        ),
    };
    let body_hash_text = if flags & 32 != 0 {
        Some(input.text())
    } else {
        None
    };
    let body = input.0;
    if flags & 16 != 0 {
        headers.push((name("x-amz-content-sha256"), hex(&Sha256::digest(body))));
    }
    if let Some(t) = body_hash_text {
        headers.push((name("x-amz-content-sha256"), t));
    }
    if flags & 4 == 0 {
        headers.push((name("authorization"), authorization));
    }
    let r = Signed {
        method: &method,
        path: &path,
        query: &query,
        headers,
        body,
    };
    let unknown = KeyPair::new(ACCESS_KEY, unknown_secret());
    let got = unknown.check(&r, at(now));
    trace!("serve_sigv4 raw: {r:?} at {now}: {got:?}");
    match got {
        Ok(()) => panic!("a request no one signed with the key was accepted: {r:?}"),
        Err(e) => check_refused(&e),
    }
}

/// The canonical request and signature as an SDK computes them (botocore's way, written here
/// apart from the server's): the path as sent, percent-encoded again; the query's pairs as
/// sent, sorted; each signed header's values trimmed, inner whitespace collapsed, joined by
/// `,`; the body's SHA-256.
#[allow(clippy::too_many_arguments)]
fn sdk_signature(
    secret: &str,
    method: &str,
    path: &str,
    query: &str,
    headers: &[(String, String)],
    signed: &[String],
    date_time: &str,
    region: &str,
    body: &[u8],
) -> String {
    let mut q: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    q.sort();
    let q: Vec<String> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut canonical_headers = String::new();
    for n in signed {
        let values: Vec<String> = headers
            .iter()
            .filter(|(k, _)| k.to_ascii_lowercase() == *n)
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        canonical_headers += &format!("{n}:{}\n", values.join(","));
    }
    let canonical = format!(
        "{method}\n{}\n{}\n{canonical_headers}\n{}\n{}",
        uri_encode(path, true),
        q.join("&"),
        signed.join(";"),
        hex(&Sha256::digest(body))
    );
    let date = &date_time[..8];
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date_time}\n{date}/{region}/sqs/aws4_request\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let mut k = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    for part in [region.as_bytes(), b"sqs", b"aws4_request"] {
        k = hmac(&k, part);
    }
    hex(&hmac(&k, to_sign.as_bytes()))
}

/// A request signed here as an SDK signs it. Bytes, in order: the clock (u32 LE, seconds after
/// [`BASE`]); the skew of `X-Amz-Date` (i16 LE, reduced to ±15 min); access key (text, `A-Z`
/// and digits kept; none: [`ACCESS_KEY`]); secret (text); region (`us-east-1`, or text with
/// `a-z`, digits and `-` kept); method (`POST`, `GET`, `PUT`, `DELETE`, text with `A-Z`
/// kept); 0–3 path segments (text, percent-encoded as an SDK does; `.` and `..` get an `x`);
/// 0–3 query pairs (name and value text, percent-encoded); a flags byte (bit 0: names
/// capitalised, 1: a signed `x-amz-content-sha256`, 2: an unsigned one, 3: the extra headers
/// unsigned, 4: `host` from the input); `host`'s value (text, if bit 4); 0–4 extra headers
/// (name: `content-type`, `x-amz-target`, `user-agent`, `x-amz-security-token`, text with
/// `a-z`, digits and `-` kept; value: text as printable ASCII); the rest is the body.
///
/// The check must accept it at the clock, and at ±15 min of `X-Amz-Date`; refuse it at
/// ±15 min 1 s, with another secret, another body, another `host`, another signature; and
/// accept it with an unsigned header added.
fn signed_request(mut input: Input<'_>) {
    let now = BASE as i64 + i64::from(input.u32());
    let signed_at = now + i64::from(input.i16()) % (MAX_SKEW.as_secs() as i64 + 1);
    let access_key = input.token(|c| c.is_ascii_uppercase() || c.is_ascii_digit(), ACCESS_KEY);
    let secret = input.text();
    let region = match input.byte() % 2 {
        0 => "us-east-1".to_owned(),
        _ => input.token(
            |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-',
            "us-east-1",
        ),
    };
    let method = match input.byte() % 5 {
        0 => "POST".to_owned(),
        1 => "GET".to_owned(),
        2 => "PUT".to_owned(),
        3 => "DELETE".to_owned(),
        _ => input.token(|c| c.is_ascii_uppercase(), "POST"),
    };
    let mut path = String::new();
    for _ in 0..input.byte() % 4 {
        let mut seg = input.text();
        if seg.is_empty() || seg == "." || seg == ".." {
            seg.push('x');
        }
        path.push('/');
        path.push_str(&uri_encode(&seg, false));
    }
    if path.is_empty() {
        path.push('/');
    }
    let mut pairs = Vec::new();
    for _ in 0..input.byte() % 4 {
        let (k, v) = (input.text(), input.text());
        pairs.push(format!(
            "{}={}",
            uri_encode(&k, false),
            uri_encode(&v, false)
        ));
    }
    let query = pairs.join("&");
    let flags = input.byte();
    let name = |n: &str| -> String {
        if flags & 1 == 0 {
            n.to_owned()
        } else {
            n.to_ascii_uppercase()
        }
    };
    let host = if flags & 16 != 0 {
        input.header_value()
    } else {
        "127.0.0.1:9324".to_owned()
    };
    let date_time = amz_date(signed_at);
    let mut headers = vec![
        (name("host"), host),
        (name("x-amz-date"), date_time.clone()),
    ];
    let mut signed = vec!["host".to_owned(), "x-amz-date".to_owned()];
    for _ in 0..input.byte() % 5 {
        let n = match input.byte() % 5 {
            0 => "content-type".to_owned(),
            1 => "x-amz-target".to_owned(),
            2 => "user-agent".to_owned(),
            3 => "x-amz-security-token".to_owned(),
            _ => {
                let t = input.token(
                    |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-',
                    "x-fuzz",
                );
                // The headers the check reads itself keep the values set here.
                match t.as_str() {
                    "authorization" | "x-amz-content-sha256" => "x-fuzz".to_owned(),
                    _ => t,
                }
            }
        };
        let v = input.header_value();
        if flags & 8 == 0 {
            signed.push(n.clone());
        }
        headers.push((name(&n), v));
    }
    let body = input.0;
    if flags & 6 != 0 {
        headers.push((name("x-amz-content-sha256"), hex(&Sha256::digest(body))));
        if flags & 2 != 0 {
            signed.push("x-amz-content-sha256".to_owned());
        }
    }
    signed.sort();
    signed.dedup();
    let signature = sdk_signature(
        &secret, &method, &path, &query, &headers, &signed, &date_time, &region, body,
    );
    let authorization = |sig: &str| {
        (
            name("authorization"),
            format!(
                "AWS4-HMAC-SHA256 Credential={access_key}/{}/{region}/sqs/aws4_request, SignedHeaders={}, Signature={sig}",
                &date_time[..8],
                signed.join(";")
            ),
        )
    };
    let mut sent = headers.clone();
    sent.push(authorization(&signature));
    let r = Signed {
        method: &method,
        path: &path,
        query: &query,
        headers: sent,
        body,
    };
    let key = KeyPair {
        access_key: access_key.clone(),
        secret: secret.clone(),
        region: region.clone(),
    };
    let show = |r: &Signed<'_>| format!("{r:?} (secret {secret:?})");
    trace!("serve_sigv4 signed: {} at {now}", show(&r));
    if let Err(e) = key.check(&r, at(now)) {
        panic!(
            "a request signed as an SDK signs it was refused: {e:?}: {}",
            show(&r)
        );
    }
    let skew = MAX_SKEW.as_secs() as i64;
    for t in [signed_at - skew, signed_at + skew] {
        if let Err(e) = key.check(&r, at(t)) {
            panic!("refused at 15 min from X-Amz-Date: {e:?}: {}", show(&r));
        }
    }
    for t in [signed_at - skew - 1, signed_at + skew + 1] {
        let e = key
            .check(&r, at(t))
            .expect_err("accepted 15 min 1 s from X-Amz-Date");
        assert_eq!(e.code, "RequestExpired", "{e:?}");
    }
    let refused =
        |r: &Signed<'_>, key: &KeyPair, what: &str, code: &str| match key.check(r, at(now)) {
            Ok(()) => panic!("accepted {what}: {}", show(r)),
            Err(e) => {
                assert_eq!(e.code, code, "{what}: {e:?}");
                check_refused(&e);
            }
        };
    let other = KeyPair {
        secret: unknown_secret().to_owned(),
        ..key.clone()
    };
    refused(&r, &other, "with another secret", "SignatureDoesNotMatch");
    let mut tampered = body.to_vec();
    match tampered.first_mut() {
        Some(b) => *b ^= 1,
        None => tampered.push(b'{'),
    }
    let another_body = Signed {
        body: &tampered,
        headers: r.headers.clone(),
        ..r
    };
    let code = if flags & 6 != 0 {
        "XAmzContentSHA256Mismatch"
    } else {
        "SignatureDoesNotMatch"
    };
    refused(&another_body, &key, "another body", code);
    let mut another_host = Signed {
        headers: r.headers.clone(),
        ..r
    };
    another_host.headers[0].1.push('x');
    refused(&another_host, &key, "another host", "SignatureDoesNotMatch");
    let mut forged = signature.into_bytes();
    forged[0] = if forged[0] == b'0' { b'1' } else { b'0' };
    let mut another_signature = Signed {
        headers: headers.clone(),
        ..r
    };
    another_signature
        .headers
        .push(authorization(std::str::from_utf8(&forged).expect("hex")));
    refused(
        &another_signature,
        &key,
        "another signature",
        "SignatureDoesNotMatch",
    );
    let mut unsigned = "x-unsigned".to_owned();
    while signed.contains(&unsigned) {
        unsigned.push('x');
    }
    let mut more = Signed {
        headers: r.headers.clone(),
        ..r
    };
    more.headers.push((unsigned, "anything".to_owned()));
    if let Err(e) = key.check(&more, at(now)) {
        panic!(
            "refused with an unsigned header added: {e:?}: {}",
            show(&more)
        );
    }
}
