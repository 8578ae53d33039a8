//! Canonical JSON (protocol.md §1.3), byte-compatible with radicle's
//! `canonical/formatter.rs` (OLPC-style canonical JSON driven by `serde_json`):
//!
//! * compact output;
//! * object members sorted by the bytes of their *serialized* keys (quotes and escapes
//!   included); if two keys serialize identically (e.g. after NFC), the later one wins;
//! * strings NFC-normalised, escaped as `serde_json` does (`\"`, `\\`, `\b \f \n \r \t`,
//!   other control characters as `\u00xx` with lower-case hex); non-ASCII and `/` raw;
//! * floats rejected; integers in plain decimal.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use unicode_normalization::UnicodeNormalization as _;

use super::CryptoError;

/// Maximum nesting depth accepted (guards the recursion; `serde_json` itself parses at most
/// 128 levels, so any document read from disk fits).
const MAX_DEPTH: usize = 512;

/// Encodes `value` as canonical JSON.
pub fn canonical_json(value: &Value) -> Result<Vec<u8>, CryptoError> {
    let mut out = Vec::new();
    write_value(value, &mut out, 0)?;
    Ok(out)
}

/// Converts `value` to a [`serde_json::Value`] and encodes it as canonical JSON.
pub fn to_canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CryptoError> {
    canonical_json(&serde_json::to_value(value)?)
}

fn write_value(value: &Value, out: &mut Vec<u8>, depth: usize) -> Result<(), CryptoError> {
    if depth > MAX_DEPTH {
        return Err(CryptoError::JsonTooDeep(MAX_DEPTH));
    }
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() {
                out.extend_from_slice(n.to_string().as_bytes());
            } else {
                return Err(CryptoError::FloatInCanonicalJson(n.to_string()));
            }
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out, depth + 1)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut members = BTreeMap::<Vec<u8>, Vec<u8>>::new();
            for (key, item) in map {
                let mut k = Vec::with_capacity(key.len() + 2);
                write_string(key, &mut k);
                let mut v = Vec::new();
                write_value(item, &mut v, depth + 1)?;
                members.insert(k, v);
            }
            out.push(b'{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&k);
                out.push(b':');
                out.extend_from_slice(&v);
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// The escape `serde_json` uses for `b`, if any.
fn escape(b: u8) -> Option<&'static [u8]> {
    Some(match b {
        b'"' => b"\\\"",
        b'\\' => b"\\\\",
        0x08 => b"\\b",
        0x0c => b"\\f",
        b'\n' => b"\\n",
        b'\r' => b"\\r",
        b'\t' => b"\\t",
        0x00..=0x1f => b"",
        _ => return None,
    })
}

/// Writes a quoted, escaped string. Like radicle's formatter, NFC is applied to each run of
/// characters between escaped ones (escaped characters are ASCII starters, so this equals
/// normalising the whole string).
fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let Some(esc) = escape(b) else { continue };
        if start < i {
            push_nfc(&s[start..i], out);
        }
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0x0f)]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    if start < bytes.len() {
        push_nfc(&s[start..], out);
    }
    out.push(b'"');
}

fn push_nfc(fragment: &str, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    for ch in fragment.nfc() {
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
    }
}
