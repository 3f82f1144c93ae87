//! AWS Signature Version 4, checked against one configured key pair (`--check-signature`). By
//! default the server accepts any signature, as local SQS emulators do.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::protocol::ApiError;

type HmacSha256 = Hmac<Sha256>;

/// A key pair requests must be signed with.
#[derive(Debug, Clone)]
pub struct KeyPair {
    /// The access key id.
    pub access_key: String,
    /// The secret access key.
    pub secret: String,
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
    /// Checks the request's `Authorization` header against this key pair.
    pub fn check(&self, r: &Signed<'_>) -> Result<(), ApiError> {
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
        let amz_date = header("x-amz-date").ok_or_else(incomplete)?;
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
        let payload_hash = match header("x-amz-content-sha256") {
            Some(h) if h != "UNSIGNED-PAYLOAD" => h.to_owned(),
            _ => hex(&Sha256::digest(r.body)),
        };
        let canonical = format!(
            "{}\n{canonical_uri}\n{canonical_query}\n{canonical_headers}\n{signed_headers}\n{payload_hash}",
            r.method
        );
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            hex(&Sha256::digest(canonical.as_bytes()))
        );
        let k = hmac(format!("AWS4{}", self.secret).as_bytes(), date.as_bytes());
        let k = hmac(&k, region.as_bytes());
        let k = hmac(&k, service.as_bytes());
        let k = hmac(&k, b"aws4_request");
        let expected = hex(&hmac(&k, to_sign.as_bytes()));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's documented example (the IAM ListUsers GET of the SigV4 guide): secret
    /// `wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY`, 20150830, us-east-1, iam.
    #[test]
    fn the_aws_example_signature_checks() {
        let kp = KeyPair {
            access_key: "AKIDEXAMPLE".into(),
            secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        };
        let good = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7";
        let mk = |sig: &str| {
            Signed {
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
                ("Authorization".into(), format!("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature={sig}")),
            ],
            body: b"",
        }
        };
        assert!(kp.check(&mk(good)).is_ok());
        let bad = kp.check(&mk(&good.replace('5', "6"))).unwrap_err();
        assert_eq!(
            (bad.code.as_str(), bad.status),
            ("SignatureDoesNotMatch", 403)
        );
        let other = KeyPair {
            access_key: "SOMEONE".into(),
            secret: kp.secret.clone(),
        };
        assert_eq!(
            other.check(&mk(good)).unwrap_err().code,
            "InvalidClientTokenId"
        );
    }
}
