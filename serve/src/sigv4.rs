//! AWS Signature Version 4, checked against one configured key pair (`--check-signature`) as
//! AWS checks it: the canonical request is built from the request as it came, with the
//! payload hash **computed from the body** (a client's `X-Amz-Content-SHA256` must equal it,
//! and `UNSIGNED-PAYLOAD` is refused: SQS's bodies are always signed); `X-Amz-Date` must be
//! within [`MAX_SKEW`] of the server's clock; the credential scope must name that date, the
//! configured region and the `sqs` service; `host` and `x-amz-date` must be signed. By
//! default (no key pair) the server checks no signature and acts as the user that owns the
//! client's socket instead (see [`crate::access`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::protocol::ApiError;

type HmacSha256 = Hmac<Sha256>;

/// A key pair requests must be signed with, and the region their scope must name.
#[derive(Debug, Clone)]
pub struct KeyPair {
    /// The access key id.
    pub access_key: String,
    /// The secret access key.
    pub secret: String,
    /// The region a credential scope must name (default `us-east-1`).
    pub region: String,
}

impl KeyPair {
    /// A key pair for region `us-east-1`.
    pub fn new(access_key: impl Into<String>, secret: impl Into<String>) -> Self {
        KeyPair {
            access_key: access_key.into(),
            secret: secret.into(),
            region: "us-east-1".into(),
        }
    }
}

/// How far a request's `X-Amz-Date` may be from the server's clock, either way: AWS's 15
/// minutes.
pub const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

/// Seconds since the Unix epoch of an `X-Amz-Date` (`YYYYMMDDTHHMMSSZ`), if it is one.
fn parse_amz_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        if !t.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (h, mi, se) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    // Days from 1970-01-01 of a civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + se)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// RFC 3986 encoding as SigV4 wants it (unreserved characters kept; `/` kept in paths).
fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn denied(code: &str, message: &str) -> ApiError {
    ApiError {
        code: code.to_owned(),
        message: message.to_owned(),
        sender: true,
        status: 403,
    }
}

/// The parts of a request a signature covers.
#[derive(Debug)]
pub struct Signed<'a> {
    /// `GET`, `POST`.
    pub method: &'a str,
    /// The path, as sent (percent-encoded).
    pub path: &'a str,
    /// The query string, as sent, without `?`.
    pub query: &'a str,
    /// Every header (name, value).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: &'a [u8],
}

impl KeyPair {
    /// Checks the request's `Authorization` header against this key pair, at time `now`.
    pub fn check(&self, r: &Signed<'_>, now: SystemTime) -> Result<(), ApiError> {
        self.verify(r, now, true)
    }

    /// What [`check`](Self::check) can check before the body arrives (`r.body` is not read):
    /// the header's form, this key, the date within the allowed skew, the scope's date, region
    /// and service, and the headers that must be signed. A request that fails it is refused
    /// before its body is read, so that a client without the key holds no body's memory.
    pub fn check_head(&self, r: &Signed<'_>, now: SystemTime) -> Result<(), ApiError> {
        self.verify(r, now, false)
    }

    /// [`check`](Self::check), or only what precedes the body's hash (`with_body` false).
    fn verify(&self, r: &Signed<'_>, now: SystemTime, with_body: bool) -> Result<(), ApiError> {
        let header = |name: &str| {
            r.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let auth = header("authorization").ok_or_else(|| {
            denied(
                "MissingAuthenticationToken",
                "Request is missing Authentication Token",
            )
        })?;
        let rest = auth.strip_prefix("AWS4-HMAC-SHA256 ").ok_or_else(|| {
            denied(
                "IncompleteSignature",
                "Only AWS4-HMAC-SHA256 signatures are accepted.",
            )
        })?;
        let (mut credential, mut signed_headers, mut signature) = (None, None, None);
        for part in rest.split(',') {
            let part = part.trim();
            if let Some(v) = part.strip_prefix("Credential=") {
                credential = Some(v);
            } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
                signed_headers = Some(v);
            } else if let Some(v) = part.strip_prefix("Signature=") {
                signature = Some(v);
            }
        }
        let incomplete = || {
            denied(
                "IncompleteSignature",
                "The Authorization header is incomplete.",
            )
        };
        let (credential, signed_headers, signature) = (
            credential.ok_or_else(incomplete)?,
            signed_headers.ok_or_else(incomplete)?,
            signature.ok_or_else(incomplete)?,
        );
        let mut scope = credential.splitn(2, '/');
        let access_key = scope.next().unwrap_or("");
        let scope = scope.next().ok_or_else(incomplete)?;
        if access_key != self.access_key {
            return Err(denied(
                "InvalidClientTokenId",
                "The security token included in the request is invalid.",
            ));
        }
        let parts: Vec<&str> = scope.split('/').collect();
        if parts.len() != 4 || parts[3] != "aws4_request" {
            return Err(incomplete());
        }
        let (date, region, service) = (parts[0], parts[1], parts[2]);
        let amz_date = header("x-amz-date").ok_or_else(|| {
            denied(
                "IncompleteSignature",
                "The request must carry an X-Amz-Date header.",
            )
        })?;
        let signed_at = parse_amz_date(amz_date).ok_or_else(|| {
            denied(
                "IncompleteSignature",
                &format!("X-Amz-Date {amz_date} is not a date of the form YYYYMMDDTHHMMSSZ."),
            )
        })?;
        let now_s = match now.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_secs() as i64,
            Err(e) => -(e.duration().as_secs() as i64),
        };
        if (now_s - signed_at).unsigned_abs() > MAX_SKEW.as_secs() {
            return Err(ApiError {
                code: "RequestExpired".into(),
                message: format!(
                    "Signature expired: {amz_date} is more than {} minutes from the server's time.",
                    MAX_SKEW.as_secs() / 60
                ),
                sender: true,
                status: 400,
            });
        }
        if !amz_date.starts_with(date) || date.len() != 8 {
            return Err(denied(
                "SignatureDoesNotMatch",
                &format!("Credential should be scoped to a valid date: {date} is not the date of X-Amz-Date {amz_date}."),
            ));
        }
        if region != self.region {
            return Err(denied(
                "SignatureDoesNotMatch",
                &format!(
                    "Credential should be scoped to a valid region, not '{region}'; this endpoint is '{}'.",
                    self.region
                ),
            ));
        }
        if service != "sqs" {
            return Err(denied(
                "SignatureDoesNotMatch",
                &format!("Credential should be scoped to correct service: 'sqs', not '{service}'."),
            ));
        }
        let names: Vec<&str> = signed_headers.split(';').collect();
        if !names.contains(&"host") || !names.contains(&"x-amz-date") {
            return Err(denied(
                "SignatureDoesNotMatch",
                "The headers host and x-amz-date must be signed.",
            ));
        }
        if !with_body {
            return Ok(());
        }
        // The body's hash is computed, never taken from the client: a captured request with
        // another body must not check.
        let payload_hash = hex(&Sha256::digest(r.body));
        match header("x-amz-content-sha256") {
            None => {}
            Some("UNSIGNED-PAYLOAD") => {
                return Err(denied(
                    "SignatureDoesNotMatch",
                    "Unsigned payloads are not accepted: the body must be signed.",
                ))
            }
            Some(h) if h.eq_ignore_ascii_case(&payload_hash) => {}
            Some(_) => {
                return Err(ApiError::sender(
                    "XAmzContentSHA256Mismatch",
                    "The provided 'x-amz-content-sha256' header does not match what was computed.",
                ))
            }
        }
        let expected = self.signature(
            r,
            signed_headers,
            &Scope {
                amz_date,
                date,
                region,
                service,
            },
            &payload_hash,
        );
        // Constant-time comparison: a signature is a secret's function.
        let same = expected.len() == signature.len()
            && expected
                .bytes()
                .zip(signature.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if same {
            Ok(())
        } else {
            Err(denied(
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.",
            ))
        }
    }
}

/// A credential scope and the request time it was signed at.
struct Scope<'a> {
    amz_date: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
}

impl KeyPair {
    /// The signature of request `r` over `signed_headers` in `scope`, with the body's hash
    /// `payload_hash` (SigV4's canonical request, string to sign and derived key).
    fn signature(
        &self,
        r: &Signed<'_>,
        signed_headers: &str,
        sc: &Scope<'_>,
        payload_hash: &str,
    ) -> String {
        // The canonical request.
        let path = if r.path.is_empty() { "/" } else { r.path };
        let canonical_uri = path
            .split('/')
            .map(|seg| uri_encode(seg, false))
            .collect::<Vec<_>>()
            .join("/");
        let mut q: Vec<(String, String)> = form_urlencoded::parse(r.query.as_bytes())
            .map(|(k, v)| (uri_encode(&k, false), uri_encode(&v, false)))
            .collect();
        q.sort();
        let canonical_query = q
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        let mut canonical_headers = String::new();
        for name in signed_headers.split(';') {
            let values: Vec<String> = r
                .headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect();
            canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
        }
        let canonical = format!(
            "{}\n{canonical_uri}\n{canonical_query}\n{canonical_headers}\n{signed_headers}\n{payload_hash}",
            r.method
        );
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{}\n{}/{}/{}/aws4_request\n{}",
            sc.amz_date,
            sc.date,
            sc.region,
            sc.service,
            hex(&Sha256::digest(canonical.as_bytes()))
        );
        let k = hmac(
            format!("AWS4{}", self.secret).as_bytes(),
            sc.date.as_bytes(),
        );
        let k = hmac(&k, sc.region.as_bytes());
        let k = hmac(&k, sc.service.as_bytes());
        let k = hmac(&k, b"aws4_request");
        hex(&hmac(&k, to_sign.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(amz_date: &str, scope: &str, sig: &str, body: &'a [u8]) -> Signed<'a> {
        Signed {
            method: "POST",
            path: "/",
            query: "",
            headers: vec![
                ("Content-Type".into(), "application/x-amz-json-1.0".into()),
                ("Host".into(), "127.0.0.1:9324".into()),
                ("X-Amz-Date".into(), amz_date.into()),
                ("X-Amz-Target".into(), "AmazonSQS.ListQueues".into()),
                (
                    "Authorization".into(),
                    format!("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{scope}, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature={sig}"),
                ),
            ],
            body,
        }
    }

    /// AWS's documented example (the IAM ListUsers GET of the SigV4 guide): secret
    /// `wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY`, 20150830, us-east-1, iam. The signing
    /// itself is checked against it; the checks around it (service, date) would refuse it.
    #[test]
    fn the_aws_example_signature_is_computed() {
        let kp = KeyPair::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
        let r = Signed {
            method: "GET",
            path: "/",
            query: "Action=ListUsers&Version=2010-05-08",
            headers: vec![
                (
                    "Content-Type".into(),
                    "application/x-www-form-urlencoded; charset=utf-8".into(),
                ),
                ("Host".into(), "iam.amazonaws.com".into()),
                ("X-Amz-Date".into(), "20150830T123600Z".into()),
            ],
            body: b"",
        };
        let sig = kp.signature(
            &r,
            "content-type;host;x-amz-date",
            &Scope {
                amz_date: "20150830T123600Z",
                date: "20150830",
                region: "us-east-1",
                service: "iam",
            },
            &hex(&Sha256::digest(b"")),
        );
        assert_eq!(
            sig,
            "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        );
    }

    #[test]
    fn amz_dates_parse() {
        assert_eq!(parse_amz_date("19700101T000000Z"), Some(0));
        assert_eq!(parse_amz_date("20150830T123600Z"), Some(1_440_938_160));
        assert_eq!(parse_amz_date("20240229T235959Z"), Some(1_709_251_199));
        for bad in [
            "2015083T123600Z",
            "20151330T123600Z",
            "20150830 123600Z",
            "2015-8-30T12360Z",
            "+0150830T123600Z",
        ] {
            assert_eq!(parse_amz_date(bad), None, "{bad}");
        }
    }

    /// The body is hashed by the server (a captured request cannot carry another body), the
    /// date is held to 15 minutes of the clock, and the scope's date, region and service are
    /// checked. (The same cases through botocore's own signer: python/tests.)
    #[test]
    fn bodies_dates_and_scopes_are_checked() {
        let kp = KeyPair::new("AKIDEXAMPLE", "secret");
        let now = UNIX_EPOCH + Duration::from_secs(1_440_938_160); // 20150830T123600Z
        let body = br#"{"QueueNamePrefix":"a"}"#;
        let sign = |amz_date: &str, scope_date: &str, region: &str, body: &[u8]| {
            let r = request(amz_date, "x", "x", body);
            let sig = kp.signature(
                &r,
                "content-type;host;x-amz-date;x-amz-target",
                &Scope {
                    amz_date,
                    date: scope_date,
                    region,
                    service: "sqs",
                },
                &hex(&Sha256::digest(body)),
            );
            (format!("{scope_date}/{region}/sqs/aws4_request"), sig)
        };
        let (scope, sig) = sign("20150830T123600Z", "20150830", "us-east-1", body);
        assert!(kp
            .check(&request("20150830T123600Z", &scope, &sig, body), now)
            .is_ok());
        // Another body under the same signature.
        let e = kp
            .check(
                &request(
                    "20150830T123600Z",
                    &scope,
                    &sig,
                    br#"{"QueueNamePrefix":"b"}"#,
                ),
                now,
            )
            .unwrap_err();
        assert_eq!((e.code.as_str(), e.status), ("SignatureDoesNotMatch", 403));
        // Another body with the client's claimed hash of the signed one: refused.
        let mut forged = request("20150830T123600Z", &scope, &sig, b"{}");
        forged
            .headers
            .push(("X-Amz-Content-SHA256".into(), hex(&Sha256::digest(body))));
        assert_eq!(
            kp.check(&forged, now).unwrap_err().code,
            "XAmzContentSHA256Mismatch"
        );
        let mut unsigned = request("20150830T123600Z", &scope, &sig, body);
        unsigned
            .headers
            .push(("X-Amz-Content-SHA256".into(), "UNSIGNED-PAYLOAD".into()));
        assert_eq!(
            kp.check(&unsigned, now).unwrap_err().code,
            "SignatureDoesNotMatch"
        );
        // The right hash, sent along: accepted.
        let mut honest = request("20150830T123600Z", &scope, &sig, body);
        honest
            .headers
            .push(("X-Amz-Content-SHA256".into(), hex(&Sha256::digest(body))));
        assert!(kp.check(&honest, now).is_ok());
        // Checked 16 minutes later, or 16 minutes earlier: expired.
        for off in [16 * 60, -16 * 60] {
            let at = UNIX_EPOCH + Duration::from_secs((1_440_938_160i64 + off) as u64);
            let e = kp
                .check(&request("20150830T123600Z", &scope, &sig, body), at)
                .unwrap_err();
            assert_eq!(e.code, "RequestExpired", "{off}");
        }
        let at = UNIX_EPOCH + Duration::from_secs(1_440_938_160 + 14 * 60);
        assert!(kp
            .check(&request("20150830T123600Z", &scope, &sig, body), at)
            .is_ok());
        // A scope whose date is not the request's, another region, another key.
        let (scope, sig) = sign("20150830T123600Z", "20150831", "us-east-1", body);
        let e = kp
            .check(&request("20150830T123600Z", &scope, &sig, body), now)
            .unwrap_err();
        assert!(e.message.contains("valid date"), "{}", e.message);
        let (scope, sig) = sign("20150830T123600Z", "20150830", "eu-west-1", body);
        let e = kp
            .check(&request("20150830T123600Z", &scope, &sig, body), now)
            .unwrap_err();
        assert!(e.message.contains("valid region"), "{}", e.message);
        let (scope, sig) = sign("20150830T123600Z", "20150830", "us-east-1", body);
        let other = KeyPair::new("SOMEONE", "secret");
        assert_eq!(
            other
                .check(&request("20150830T123600Z", &scope, &sig, body), now)
                .unwrap_err()
                .code,
            "InvalidClientTokenId"
        );
        let wrong_secret = KeyPair::new("AKIDEXAMPLE", "other");
        assert_eq!(
            wrong_secret
                .check(&request("20150830T123600Z", &scope, &sig, body), now)
                .unwrap_err()
                .code,
            "SignatureDoesNotMatch"
        );
    }
}
