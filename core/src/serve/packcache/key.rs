//! What makes two upload-pack requests the same for the pack cache: a stateless-rpc request body
//! (protocol v0/v1 or a v2 `fetch`) normalised to the set of things that change the response's
//! bytes — wants (order and repeats do not matter), shallow/deepen, filter, and the capabilities
//! or v2 arguments that change the output — and nothing else (`agent=`, `session-id=`).
//!
//! Only requests without `have` lines are cacheable: a clone (full, shallow or partial) asks
//! the same thing every time, a negotiation round depends on the client's history. Anything this
//! module does not know is not cacheable either, so an unknown capability can never make two
//! different requests share an answer.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::serve::View;
use seedd_proto::crypto::RepoId;

/// Largest request body considered (a clone of 10,000 refs wants < 600 KiB).
pub const MAX_CACHEABLE_REQUEST: usize = 1 << 20;

/// Why a request goes to git directly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotCacheable {
    #[error("it has `have` lines (a negotiation)")]
    Haves,
    #[error("it wants nothing")]
    NoWants,
    #[error("it is not a v2 `fetch`")]
    NotFetch,
    #[error("`{0}` is not understood here")]
    Unknown(String),
    #[error("`{0}` is given twice")]
    Repeated(&'static str),
    #[error("malformed pkt-lines")]
    Malformed,
    #[error("larger than {MAX_CACHEABLE_REQUEST} bytes")]
    TooLarge,
}

/// A request body normalised: the same text for requests git answers with the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalised(String);

impl Normalised {
    /// `body` is a whole stateless-rpc request; `v2` when it was sent with `version=2`.
    pub fn parse(v2: bool, body: &[u8]) -> Result<Self, NotCacheable> {
        if body.len() > MAX_CACHEABLE_REQUEST {
            return Err(NotCacheable::TooLarge);
        }
        let lines = pkt_lines(body).ok_or(NotCacheable::Malformed)?;
        if v2 {
            parse_v2(&lines)
        } else {
            parse_v0(&lines)
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The cache key: repository, view, refs fingerprint and the normalised request, hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key([u8; 32]);

impl Key {
    pub fn new(rid: &RepoId, view: View, fingerprint: &[u8], request: &Normalised) -> Self {
        let mut h = Sha256::new();
        h.update(rid.canonical().as_bytes());
        h.update(b"\0");
        match view {
            View::Canonical => h.update(b"canonical"),
            View::Namespace(nid) => h.update(format!("ns {nid}").as_bytes()),
            View::All => h.update(b"all"),
        }
        h.update(b"\0");
        h.update(fingerprint);
        h.update(b"\0");
        h.update(request.as_str().as_bytes());
        Self(h.finalize().into())
    }

    /// The file name of the entry (hex).
    pub(crate) fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// One pkt-line: a payload (without its trailing newline), a flush or a delimiter.
#[derive(Debug, PartialEq, Eq)]
enum Pkt<'a> {
    Data(&'a str),
    Flush,
    Delim,
}

fn pkt_lines(mut rest: &[u8]) -> Option<Vec<Pkt<'_>>> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = usize::from_str_radix(std::str::from_utf8(rest.get(..4)?).ok()?, 16).ok()?;
        match len {
            0 => out.push(Pkt::Flush),
            1 => out.push(Pkt::Delim),
            2..=4 => return None,
            n => {
                let payload = std::str::from_utf8(rest.get(4..n)?).ok()?;
                out.push(Pkt::Data(payload.strip_suffix('\n').unwrap_or(payload)));
            }
        }
        rest = rest.get(len.max(4)..)?;
    }
    Some(out)
}

fn is_oid(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The normalised lines of one request, sorted and without repeats.
#[derive(Default)]
struct Lines {
    lines: BTreeSet<String>,
    wants: usize,
    single: BTreeSet<&'static str>,
}

impl Lines {
    fn add(&mut self, line: String) {
        self.lines.insert(line);
    }

    /// `want <oid>`.
    fn want(&mut self, oid: &str, line: &str) -> Result<(), NotCacheable> {
        if !is_oid(oid) {
            return Err(NotCacheable::Unknown(line.to_owned()));
        }
        self.wants += 1;
        self.add(format!("want {oid}"));
        Ok(())
    }

    /// An argument git keeps one value of (the last): given twice, the order would matter.
    fn once(&mut self, name: &'static str, line: &str) -> Result<(), NotCacheable> {
        if !self.single.insert(name) {
            return Err(NotCacheable::Repeated(name));
        }
        self.add(line.to_owned());
        Ok(())
    }

    /// Lines shared by v0 and v2 requests. `Ok(false)`: not one of them.
    fn common(&mut self, line: &str) -> Result<bool, NotCacheable> {
        let (word, arg) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "want" => self.want(arg, line)?,
            "have" => return Err(NotCacheable::Haves),
            "shallow" if is_oid(arg) => self.add(line.to_owned()),
            "deepen" if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) => {
                self.once("deepen", line)?
            }
            "deepen-since" if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) => {
                self.once("deepen-since", line)?
            }
            "deepen-not" if !arg.is_empty() => self.add(line.to_owned()),
            "filter" if !arg.is_empty() => self.once("filter", line)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn finish(self, protocol: &str) -> Result<Normalised, NotCacheable> {
        if self.wants == 0 {
            return Err(NotCacheable::NoWants);
        }
        let mut text = format!("{protocol}\n");
        for l in &self.lines {
            text.push_str(l);
            text.push('\n');
        }
        Ok(Normalised(text))
    }
}

/// v0/v1 capabilities (on the first `want`) that may change the response's bytes, kept in the
/// key; `agent=` and `session-id=` are dropped; any other is not cacheable.
const V0_CAPS: &[&str] = &[
    "multi_ack",
    "multi_ack_detailed",
    "no-done",
    "side-band",
    "side-band-64k",
    "thin-pack",
    "no-progress",
    "include-tag",
    "ofs-delta",
    "shallow",
    "deepen-since",
    "deepen-not",
    "deepen-relative",
    "filter",
    "allow-tip-sha1-in-want",
    "allow-reachable-sha1-in-want",
    "object-format=sha1",
];

fn parse_v0(lines: &[Pkt<'_>]) -> Result<Normalised, NotCacheable> {
    let mut out = Lines::default();
    let mut iter = lines.iter();
    let mut first = true;
    // Wants and shallow/deepen/filter until the flush.
    loop {
        match iter.next() {
            Some(Pkt::Data(line)) => {
                // The first want carries the capabilities after its oid, space-separated.
                let owned;
                let line = if first {
                    first = false;
                    let mut words = line.split(' ');
                    let (Some("want"), Some(oid)) = (words.next(), words.next()) else {
                        return Err(NotCacheable::Unknown((*line).to_owned()));
                    };
                    for cap in words.filter(|c| !c.is_empty()) {
                        if cap.starts_with("agent=") || cap.starts_with("session-id=") {
                            continue;
                        }
                        if !V0_CAPS.contains(&cap) {
                            return Err(NotCacheable::Unknown(cap.to_owned()));
                        }
                        out.add(format!("capability {cap}"));
                    }
                    owned = format!("want {oid}");
                    owned.as_str()
                } else {
                    line
                };
                if !out.common(line)? {
                    return Err(NotCacheable::Unknown(line.to_owned()));
                }
            }
            Some(Pkt::Flush) => break,
            Some(Pkt::Delim) | None => return Err(NotCacheable::Malformed),
        }
    }
    // Then nothing, or `done` (a clone's whole request), and the end.
    match iter.next() {
        None => {}
        Some(Pkt::Data("done")) => out.add("done".to_owned()),
        Some(Pkt::Data(l)) if l.starts_with("have ") => return Err(NotCacheable::Haves),
        Some(_) => return Err(NotCacheable::Malformed),
    }
    if iter.next().is_some() {
        return Err(NotCacheable::Malformed);
    }
    out.finish("v0")
}

/// v2 `fetch` arguments without a value that change the response; `done` and `wait-for-done`
/// change what git answers too.
const V2_FLAGS: &[&str] = &[
    "thin-pack",
    "no-progress",
    "include-tag",
    "ofs-delta",
    "sideband-all",
    "deepen-relative",
    "done",
    "wait-for-done",
];

fn parse_v2(lines: &[Pkt<'_>]) -> Result<Normalised, NotCacheable> {
    let mut out = Lines::default();
    let mut iter = lines.iter();
    if iter.next() != Some(&Pkt::Data("command=fetch")) {
        return Err(NotCacheable::NotFetch);
    }
    // Capabilities until the delimiter.
    loop {
        match iter.next() {
            Some(Pkt::Delim) => break,
            Some(Pkt::Data(cap)) => {
                if cap.starts_with("agent=") || cap.starts_with("session-id=") {
                    continue;
                }
                if *cap != "object-format=sha1" {
                    return Err(NotCacheable::Unknown((*cap).to_owned()));
                }
                out.add((*cap).to_owned());
            }
            Some(Pkt::Flush) | None => return Err(NotCacheable::Malformed),
        }
    }
    loop {
        match iter.next() {
            Some(Pkt::Data(line)) => {
                if V2_FLAGS.contains(line) {
                    out.add((*line).to_owned());
                } else if !out.common(line)? {
                    return Err(NotCacheable::Unknown((*line).to_owned()));
                }
            }
            Some(Pkt::Flush) => break,
            Some(Pkt::Delim) | None => return Err(NotCacheable::Malformed),
        }
    }
    if iter.next().is_some() {
        return Err(NotCacheable::Malformed);
    }
    out.finish("v2")
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    fn pkt(line: &str) -> String {
        format!("{:04x}{line}", line.len() + 4)
    }

    fn v2(args: &[&str]) -> Vec<u8> {
        v2_caps(&["agent=git/2.47.0", "object-format=sha1"], args)
    }

    fn v2_caps(caps: &[&str], args: &[&str]) -> Vec<u8> {
        let mut s = pkt("command=fetch\n");
        for c in caps {
            s.push_str(&pkt(&format!("{c}\n")));
        }
        s.push_str("0001");
        for a in args {
            s.push_str(&pkt(&format!("{a}\n")));
        }
        s.push_str("0000");
        s.into_bytes()
    }

    fn v0(caps: &str, wants: &[&str], extra: &[&str], tail: &[&str]) -> Vec<u8> {
        let mut s = String::new();
        for (i, w) in wants.iter().enumerate() {
            if i == 0 {
                s.push_str(&pkt(&format!("want {w} {caps}\n")));
            } else {
                s.push_str(&pkt(&format!("want {w}\n")));
            }
        }
        for e in extra {
            s.push_str(&pkt(&format!("{e}\n")));
        }
        s.push_str("0000");
        for t in tail {
            s.push_str(&pkt(&format!("{t}\n")));
        }
        s.into_bytes()
    }

    fn norm(v2: bool, body: &[u8]) -> Result<Normalised, NotCacheable> {
        Normalised::parse(v2, body)
    }

    #[test]
    fn v2_wants_are_order_and_repeat_insensitive() {
        let a = norm(
            true,
            &v2(&[
                "thin-pack",
                &format!("want {A}"),
                &format!("want {B}"),
                "done",
            ]),
        );
        let b = norm(
            true,
            &v2(&[
                &format!("want {B}"),
                "done",
                &format!("want {A}"),
                &format!("want {B}"),
                "thin-pack",
            ]),
        );
        assert_eq!(a, b);
        let a = a.unwrap();
        assert!(a.as_str().starts_with("v2\n"), "{}", a.as_str());
        assert!(a.as_str().contains(&format!("want {A}\nwant {B}\n")));
    }

    #[test]
    fn v2_agent_and_session_do_not_matter_but_arguments_do() {
        let base = norm(true, &v2(&[&format!("want {A}"), "done"])).unwrap();
        let other_agent = norm(
            true,
            &v2_caps(
                &["agent=git/2.30.0", "session-id=x", "object-format=sha1"],
                &[&format!("want {A}"), "done"],
            ),
        )
        .unwrap();
        assert_eq!(base, other_agent);
        for args in [
            vec![format!("want {A}"), "done".into(), "ofs-delta".into()],
            vec![format!("want {A}"), "done".into(), "deepen 1".into()],
            vec![
                format!("want {A}"),
                "done".into(),
                "filter blob:none".into(),
            ],
            vec![format!("want {A}"), "done".into(), "no-progress".into()],
            vec![format!("want {A}"), "done".into(), "include-tag".into()],
            vec![format!("want {A}")],
            vec![format!("want {B}"), "done".into()],
        ] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let n = norm(true, &v2(&args)).unwrap();
            assert_ne!(n, base, "{args:?}");
        }
        // v0 and v2 never share a key.
        let v0 = norm(false, &v0("", &[A], &[], &["done"])).unwrap();
        assert_ne!(v0.as_str().replace("v0", "v2"), v0.as_str());
    }

    #[test]
    fn haves_and_unknown_things_are_not_cacheable() {
        let have = format!("have {B}");
        assert_eq!(
            norm(true, &v2(&[&format!("want {A}"), &have, "done"])),
            Err(NotCacheable::Haves)
        );
        assert_eq!(
            norm(false, &v0("ofs-delta", &[A], &[], &[&have, "done"])),
            Err(NotCacheable::Haves)
        );
        assert_eq!(norm(true, &v2(&["done"])), Err(NotCacheable::NoWants));
        assert!(matches!(
            norm(
                true,
                &v2(&[&format!("want {A}"), "want-ref refs/heads/main"])
            ),
            Err(NotCacheable::Unknown(_))
        ));
        assert!(matches!(
            norm(true, &v2(&[&format!("want {A}"), "packfile-uris https"])),
            Err(NotCacheable::Unknown(_))
        ));
        assert!(matches!(
            norm(
                true,
                &v2_caps(&["server-option=x"], &[&format!("want {A}")])
            ),
            Err(NotCacheable::Unknown(_))
        ));
        assert!(matches!(
            norm(false, &v0("ofs-delta frobnicate", &[A], &[], &["done"])),
            Err(NotCacheable::Unknown(_))
        ));
        assert_eq!(
            norm(true, &v2(&[&format!("want {A}"), "deepen 1", "deepen 2"])),
            Err(NotCacheable::Repeated("deepen"))
        );
        assert_eq!(
            norm(true, b"0014command=ls-refs\n0000"),
            Err(NotCacheable::NotFetch)
        );
        assert_eq!(norm(true, b"00zz"), Err(NotCacheable::Malformed));
        assert_eq!(norm(false, b"0003"), Err(NotCacheable::Malformed));
        let mut huge = v2(&[&format!("want {A}")]);
        huge.resize(MAX_CACHEABLE_REQUEST + 1, b'0');
        assert_eq!(norm(true, &huge), Err(NotCacheable::TooLarge));
    }

    #[test]
    fn v0_capabilities_are_filtered_and_sorted() {
        let caps = "multi_ack_detailed no-done side-band-64k thin-pack ofs-delta agent=git/2.47.0";
        let a = norm(false, &v0(caps, &[A, B], &["deepen 1"], &["done"])).unwrap();
        let reordered =
            "ofs-delta thin-pack agent=git/2.1 side-band-64k no-done multi_ack_detailed";
        let b = norm(false, &v0(reordered, &[B, A, A], &["deepen 1"], &["done"])).unwrap();
        assert_eq!(a, b);
        assert!(!a.as_str().contains("agent"));
        assert!(a.as_str().contains("capability side-band-64k\n"));
        let c = norm(
            false,
            &v0("side-band-64k", &[A, B], &["deepen 1"], &["done"]),
        )
        .unwrap();
        assert_ne!(
            a, c,
            "capabilities that change the bytes are part of the key"
        );
    }

    #[test]
    fn keys_differ_by_repository_view_and_fingerprint() {
        let n = norm(true, &v2(&[&format!("want {A}"), "done"])).unwrap();
        let r1 = RepoId::from_oid_bytes([1; 20]);
        let r2 = RepoId::from_oid_bytes([2; 20]);
        let k = Key::new(&r1, View::Canonical, b"f1", &n);
        assert_eq!(k, Key::new(&r1, View::Canonical, b"f1", &n));
        assert_ne!(k, Key::new(&r2, View::Canonical, b"f1", &n));
        assert_ne!(k, Key::new(&r1, View::All, b"f1", &n));
        assert_ne!(k, Key::new(&r1, View::Canonical, b"f2", &n));
        assert_eq!(k.hex().len(), 64);
    }
}
