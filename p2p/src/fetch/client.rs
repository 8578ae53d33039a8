//! The git protocol-v2 client of a fetch, without I/O (gitprotocol-v2(5), protocol.md §6):
//! the pkt-line reader, the `ls-refs` and `fetch` requests, the choice of refs a stage takes
//! and the parsing of the answers. [`super::transfer`] carries the bytes over the stream and
//! hands the pack to `git index-pack`.
//!
//! Why in process and not `git fetch`: a fetch ran `git fetch` twice (special refs, then data),
//! each with `git remote-ext`, the bridge, `index-pack` and a connectivity `rev-list` — about
//! ten processes for two small requests. The requests are a few lines; what git does that is
//! worth its cost (thin-pack completion, the pack index) stays with `git index-pack`, and the
//! connectivity check with the walks that follow (validation reads every signed ref, and
//! `pack-objects --revs` fails on a missing object before anything reaches storage).

use bytes::{Buf, BytesMut};

use seedd_core::policy::NamespaceFilter;

use seedd_proto::crypto::NodeId;

use super::QUARANTINE;

/// A pkt-line's most bytes (length header included), as git's `LARGE_PACKET_MAX`.
const MAX_PKT: usize = 65520;
/// Haves sent with a `fetch` request at most: a request stays below ~200 KB however many refs
/// a repository holds; past it the peer may send objects we have (bounded by the byte budget).
pub(super) const MAX_HAVES: usize = 4096;

/// What went wrong talking to the peer's `upload-pack`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("the peer's answer is not git protocol v2: {0}")]
    Malformed(&'static str),
    #[error("the peer's upload-pack does not offer `{0}`")]
    Unsupported(&'static str),
    #[error("the peer's upload-pack refused: {0}")]
    Remote(String),
    #[error("the peer has no {0}")]
    MissingRef(String),
    #[error("the peer closed the stream before its answer ended")]
    Closed,
}

/// One pkt-line (gitprotocol-common(5)).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pkt {
    Flush,
    Delim,
    ResponseEnd,
    Data(BytesMut),
}

/// A data pkt-line carrying `line`.
pub(super) fn pkt(line: &str) -> Vec<u8> {
    let mut out = format!("{:04x}", line.len() + 4).into_bytes();
    out.extend_from_slice(line.as_bytes());
    out
}

const FLUSH: &[u8] = b"0000";
const DELIM: &[u8] = b"0001";

/// Splits the bytes of a stream into pkt-lines, whatever their chunking.
#[derive(Default)]
pub(super) struct Reader {
    buf: BytesMut,
}

impl Reader {
    pub(super) fn feed(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole pkt-line, `None` until it has arrived.
    pub(super) fn next(&mut self) -> Result<Option<Pkt>, ProtocolError> {
        let Some(header) = self.buf.get(..4) else {
            return Ok(None);
        };
        let len = std::str::from_utf8(header)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or(ProtocolError::Malformed("a pkt-line length is not hex"))?;
        let pkt = match len {
            0 => Pkt::Flush,
            1 => Pkt::Delim,
            2 => Pkt::ResponseEnd,
            3 => return Err(ProtocolError::Malformed("a pkt-line of length 3")),
            l if l > MAX_PKT => return Err(ProtocolError::Malformed("a pkt-line too long")),
            l => {
                if self.buf.len() < l {
                    return Ok(None);
                }
                let mut data = self.buf.split_to(l);
                data.advance(4);
                return Ok(Some(Pkt::Data(data)));
            }
        };
        self.buf.advance(4);
        Ok(Some(pkt))
    }
}

/// A data line without its trailing newline; `ERR` lines are the peer's refusal.
fn text(data: &[u8]) -> Result<&str, ProtocolError> {
    let s =
        std::str::from_utf8(data).map_err(|_| ProtocolError::Malformed("a line is not UTF-8"))?;
    let s = s.strip_suffix('\n').unwrap_or(s);
    match s.strip_prefix("ERR ") {
        Some(e) => Err(ProtocolError::Remote(e.to_owned())),
        None => Ok(s),
    }
}

/// The capability advertisement, read up to its flush: `version 2`, then one capability a line.
#[derive(Default)]
pub(super) struct Advertisement {
    lines: usize,
    ls_refs: bool,
    fetch: bool,
}

impl Advertisement {
    /// Takes one pkt-line; `true` once the advertisement ended (and offers what we use).
    pub(super) fn take(&mut self, pkt: Pkt) -> Result<bool, ProtocolError> {
        match pkt {
            Pkt::Data(d) => {
                let line = text(&d)?;
                if self.lines == 0 && line != "version 2" {
                    return Err(ProtocolError::Malformed(
                        "it does not start with `version 2`",
                    ));
                }
                self.lines += 1;
                let name = line.split('=').next().unwrap_or_default();
                self.ls_refs |= name == "ls-refs";
                self.fetch |= name == "fetch";
                Ok(false)
            }
            Pkt::Flush if self.lines > 0 => {
                if !self.ls_refs {
                    return Err(ProtocolError::Unsupported("ls-refs"));
                }
                if !self.fetch {
                    return Err(ProtocolError::Unsupported("fetch"));
                }
                Ok(true)
            }
            _ => Err(ProtocolError::Malformed(
                "an empty capability advertisement",
            )),
        }
    }
}

/// The refs a stage of the fetch asks for: the canonical `refs/rad/id`, and `rad/id` and
/// `rad/sigrefs` of every namespace not excluded (or every `rad/*` ref of the listed ones).
/// Their `ref-prefix` arguments, for `ls-refs`.
pub(super) fn ref_prefixes(filter: &NamespaceFilter) -> Vec<String> {
    let mut out = vec!["refs/rad/id".to_owned()];
    match filter {
        NamespaceFilter::All { .. } => out.push("refs/namespaces/".to_owned()),
        NamespaceFilter::Only(nids) => out.extend(
            nids.iter()
                .map(|n| format!("refs/namespaces/{n}/refs/rad/")),
        ),
    }
    out
}

/// The `ls-refs` request for `prefixes`.
pub(super) fn ls_refs_request(prefixes: &[String]) -> Vec<u8> {
    let mut out = pkt("command=ls-refs\n");
    out.extend_from_slice(DELIM);
    for p in prefixes {
        out.extend(pkt(&format!("ref-prefix {p}\n")));
    }
    out.extend_from_slice(FLUSH);
    out
}

/// The `ls-refs` answer, read up to its flush: `(name, oid)` of each ref.
#[derive(Default)]
pub(super) struct RefList {
    pub(super) refs: Vec<(String, String)>,
}

impl RefList {
    /// Takes one pkt-line; `true` once the list ended.
    pub(super) fn take(&mut self, pkt: Pkt) -> Result<bool, ProtocolError> {
        match pkt {
            Pkt::Data(d) => {
                let line = text(&d)?;
                let mut parts = line.split(' ');
                let (Some(oid), Some(name)) = (parts.next(), parts.next()) else {
                    return Err(ProtocolError::Malformed("an ls-refs line without a name"));
                };
                if oid.len() != 40 || !oid.bytes().all(|b| b.is_ascii_hexdigit()) {
                    // `unborn` (HEAD without a commit) and other object formats: not ours.
                    return Ok(false);
                }
                self.refs.push((name.to_owned(), oid.to_ascii_lowercase()));
                Ok(false)
            }
            Pkt::Flush => Ok(true),
            _ => Err(ProtocolError::Malformed("a delimiter in an ls-refs answer")),
        }
    }
}

/// Where each listed ref the stage takes lands in the quarantine (`(destination, oid)`), as
/// the refspecs `+refs/rad/id:<q>/rad/id`, `+refs/namespaces/*/refs/rad/{id,sigrefs}:<q>/…`
/// with `^refs/namespaces/<excluded>/*`, or `+refs/namespaces/<n>/refs/rad/*:<q>/…` did with
/// `git fetch`. The peer must have `refs/rad/id`.
pub(super) fn select(
    filter: &NamespaceFilter,
    refs: &[(String, String)],
) -> Result<Vec<(String, String)>, ProtocolError> {
    let mut out = Vec::new();
    let mut canonical = false;
    for (name, oid) in refs {
        let take = if name == "refs/rad/id" {
            canonical = true;
            true
        } else if let Some(rest) = name.strip_prefix("refs/namespaces/") {
            let Some((ns, tail)) = rest.split_once('/') else {
                continue;
            };
            // A namespace is a node id, and every name we write is one git accepts (the
            // quarantine's refs are files).
            let Ok(nid) = ns.parse::<NodeId>() else {
                continue;
            };
            if !plain_ref_name(tail) {
                continue;
            }
            match filter {
                NamespaceFilter::All { except } => {
                    (tail == "refs/rad/id" || tail == "refs/rad/sigrefs") && !except.contains(&nid)
                }
                NamespaceFilter::Only(nids) => {
                    tail.starts_with("refs/rad/")
                        && tail.len() > "refs/rad/".len()
                        && nids.contains(&nid)
                }
            }
        } else {
            false
        };
        if take {
            let dst = format!("{QUARANTINE}/{}", name.trim_start_matches("refs/"));
            out.push((dst, oid.clone()));
        }
    }
    if !canonical {
        return Err(ProtocolError::MissingRef("refs/rad/id".into()));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Whether `name` is made of components git accepts everywhere (`git check-ref-format`'s
/// rules, narrowed): letters, digits, `-`, `_`, `.` and `/` between non-empty components that
/// neither start with `.` nor end with `.lock`.
fn plain_ref_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('/').all(|c| {
            !c.is_empty()
                && !c.starts_with('.')
                && !c.ends_with(".lock")
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

/// The `fetch` request: `wants`, `haves` (at most [`MAX_HAVES`]) and `done` in one round —
/// the peer answers with the pack at once, leaving out what the haves it knows reach.
pub(super) fn fetch_request(wants: &[String], haves: &[String]) -> Vec<u8> {
    let mut out = pkt("command=fetch\n");
    out.extend_from_slice(DELIM);
    for arg in ["thin-pack\n", "ofs-delta\n", "no-progress\n"] {
        out.extend(pkt(arg));
    }
    for w in wants {
        out.extend(pkt(&format!("want {w}\n")));
    }
    for h in haves.iter().take(MAX_HAVES) {
        out.extend(pkt(&format!("have {h}\n")));
    }
    out.extend(pkt("done\n"));
    out.extend_from_slice(FLUSH);
    out
}

/// What a pkt-line of the `fetch` answer is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Nothing to do with it (a section before the pack, progress).
    More,
    /// Bytes of the pack (side-band 1).
    Pack(BytesMut),
    /// The pack ended.
    Done,
}

/// The `fetch` answer: sections (`acknowledgments`, `shallow-info`, `wanted-refs`,
/// `packfile-uris`) skipped up to `packfile`, whose side-band carries the pack (band 1),
/// progress (2) and a fatal error (3), up to the flush.
#[derive(Default)]
pub(super) struct FetchAnswer {
    /// In a section; whether it is the pack's.
    section: Option<bool>,
}

impl FetchAnswer {
    pub(super) fn take(&mut self, pkt: Pkt) -> Result<Answer, ProtocolError> {
        match (self.section, pkt) {
            (None, Pkt::Data(d)) => {
                let header = text(&d)?;
                self.section = Some(header == "packfile");
                Ok(Answer::More)
            }
            (Some(true), Pkt::Data(mut d)) => {
                let band = d.first().copied();
                d.advance(1.min(d.len()));
                match band {
                    Some(1) => Ok(Answer::Pack(d)),
                    Some(2) => Ok(Answer::More),
                    Some(3) => Err(ProtocolError::Remote(
                        String::from_utf8_lossy(&d).trim().to_owned(),
                    )),
                    _ => Err(ProtocolError::Malformed("a pack line without a side-band")),
                }
            }
            (Some(true), Pkt::Flush) => Ok(Answer::Done),
            (Some(false), Pkt::Data(d)) => {
                text(&d)?;
                Ok(Answer::More)
            }
            (Some(false), Pkt::Delim) => {
                self.section = None;
                Ok(Answer::More)
            }
            (Some(false), Pkt::Flush) | (None, Pkt::Flush) => {
                Err(ProtocolError::Malformed("the answer ended without a pack"))
            }
            _ => Err(ProtocolError::Malformed("an unexpected delimiter")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pkt of `bytes`, fed in chunks of `chunk` bytes.
    fn pkts(bytes: &[u8], chunk: usize) -> Vec<Pkt> {
        let mut r = Reader::default();
        let mut out = Vec::new();
        for part in bytes.chunks(chunk) {
            r.feed(part);
            while let Some(p) = r.next().unwrap() {
                out.push(p);
            }
        }
        out
    }

    #[test]
    fn reader_splits_pkt_lines_across_any_chunking() {
        let stream = b"000eversion 2\n0000000cls-refs\n00010002";
        for chunk in 1..stream.len() {
            assert_eq!(
                pkts(stream, chunk),
                vec![
                    Pkt::Data(BytesMut::from(&b"version 2\n"[..])),
                    Pkt::Flush,
                    Pkt::Data(BytesMut::from(&b"ls-refs\n"[..])),
                    Pkt::Delim,
                    Pkt::ResponseEnd,
                ],
                "chunk {chunk}"
            );
        }
        for bad in [&b"zzzz"[..], b"0003", b"fff1"] {
            let mut r = Reader::default();
            r.feed(bad);
            assert!(r.next().is_err(), "{bad:?}");
        }
    }

    /// The advertisement of git 2.47's `upload-pack` (as `git upload-pack --advertise-refs`
    /// prints it with `GIT_PROTOCOL=version=2`).
    #[test]
    fn advertisement_of_git_upload_pack_is_taken() {
        let mut ad = Advertisement::default();
        let bytes = [
            pkt("version 2\n"),
            pkt("agent=git/2.47.3-Linux\n"),
            pkt("ls-refs=unborn\n"),
            pkt("fetch=shallow wait-for-done\n"),
            pkt("server-option\n"),
            pkt("object-format=sha1\n"),
            FLUSH.to_vec(),
        ]
        .concat();
        let mut ended = false;
        for p in pkts(&bytes, 7) {
            ended = ad.take(p).unwrap();
        }
        assert!(ended);
        let mut ad = Advertisement::default();
        assert!(ad
            .take(Pkt::Data(BytesMut::from(
                &b"# service=git-upload-pack\n"[..]
            )))
            .is_err());
        let mut ad = Advertisement::default();
        ad.take(Pkt::Data(BytesMut::from(&b"version 2\n"[..])))
            .unwrap();
        ad.take(Pkt::Data(BytesMut::from(&b"ls-refs\n"[..])))
            .unwrap();
        assert_eq!(
            ad.take(Pkt::Flush),
            Err(ProtocolError::Unsupported("fetch"))
        );
        let mut ad = Advertisement::default();
        assert_eq!(
            ad.take(Pkt::Data(BytesMut::from(&b"ERR no such repository\n"[..]))),
            Err(ProtocolError::Remote("no such repository".into()))
        );
    }

    #[test]
    fn ls_refs_request_lists_prefixes() {
        let a = NodeId::from_bytes([1; 32]);
        let req = ls_refs_request(&ref_prefixes(&NamespaceFilter::Only(vec![a])));
        let expect = format!(
            "0014command=ls-refs\n0001001bref-prefix refs/rad/id\n{:04x}ref-prefix refs/namespaces/{a}/refs/rad/\n0000",
            "ref-prefix refs/namespaces//refs/rad/\n".len() + a.to_string().len() + 4
        );
        assert_eq!(String::from_utf8(req).unwrap(), expect);
        assert_eq!(
            ref_prefixes(&NamespaceFilter::All { except: vec![a] }),
            vec!["refs/rad/id".to_owned(), "refs/namespaces/".to_owned()]
        );
    }

    #[test]
    fn ref_list_parses_lines_and_skips_unborn() {
        let oid = "a".repeat(40);
        let bytes = [
            pkt(&format!("{oid} refs/rad/id\n")),
            pkt("unborn HEAD symref-target:refs/heads/main\n"),
            pkt(&format!(
                "{} refs/namespaces/x/refs/rad/sigrefs peeled:{oid}\n",
                "B".repeat(40)
            )),
            FLUSH.to_vec(),
        ]
        .concat();
        let mut list = RefList::default();
        let mut ended = false;
        for p in pkts(&bytes, 5) {
            ended = list.take(p).unwrap();
        }
        assert!(ended);
        assert_eq!(
            list.refs,
            vec![
                ("refs/rad/id".to_owned(), oid),
                (
                    "refs/namespaces/x/refs/rad/sigrefs".to_owned(),
                    "b".repeat(40)
                ),
            ]
        );
    }

    /// The same choice as the refspecs `git fetch` was given (`transfer::special_refspecs`).
    #[test]
    fn select_takes_what_the_refspecs_took() {
        let a = NodeId::from_bytes([1; 32]);
        let b = NodeId::from_bytes([2; 32]);
        let o = |c: char| c.to_string().repeat(40);
        let refs = vec![
            ("refs/rad/id".to_owned(), o('1')),
            (format!("refs/namespaces/{a}/refs/rad/sigrefs"), o('2')),
            (format!("refs/namespaces/{a}/refs/rad/id"), o('3')),
            (format!("refs/namespaces/{a}/refs/heads/main"), o('4')),
            (format!("refs/namespaces/{b}/refs/rad/sigrefs"), o('5')),
            (
                format!("refs/namespaces/{b}/refs/rad/sigrefs-parent"),
                o('6'),
            ),
            ("refs/heads/main".to_owned(), o('7')),
            // Not a node id, or a name git refuses: never taken.
            ("refs/namespaces/../refs/rad/id".to_owned(), o('8')),
            ("refs/namespaces/x/refs/rad/id".to_owned(), o('8')),
            (format!("refs/namespaces/{b}/refs/rad/../../x"), o('8')),
            (format!("refs/namespaces/{b}/refs/rad/a.lock"), o('8')),
            (format!("refs/namespaces/{b}/refs/rad/a b"), o('8')),
        ];
        let q = |n: &str| format!("{QUARANTINE}/{n}");
        let all = select(&NamespaceFilter::All { except: vec![b] }, &refs).unwrap();
        assert_eq!(
            all,
            vec![
                (q(&format!("namespaces/{a}/refs/rad/id")), o('3')),
                (q(&format!("namespaces/{a}/refs/rad/sigrefs")), o('2')),
                (q("rad/id"), o('1')),
            ]
        );
        let only = select(&NamespaceFilter::Only(vec![b]), &refs).unwrap();
        assert_eq!(
            only,
            vec![
                (q(&format!("namespaces/{b}/refs/rad/sigrefs")), o('5')),
                (
                    q(&format!("namespaces/{b}/refs/rad/sigrefs-parent")),
                    o('6')
                ),
                (q("rad/id"), o('1')),
            ]
        );
        assert_eq!(
            select(&NamespaceFilter::All { except: vec![] }, &refs[1..]),
            Err(ProtocolError::MissingRef("refs/rad/id".into()))
        );
    }

    #[test]
    fn fetch_request_is_one_round_with_done() {
        let w = "c".repeat(40);
        let haves: Vec<String> = (0..MAX_HAVES + 10).map(|i| format!("{i:040x}")).collect();
        let req = String::from_utf8(fetch_request(std::slice::from_ref(&w), &haves)).unwrap();
        assert!(req
            .starts_with("0012command=fetch\n0001000ethin-pack\n000eofs-delta\n0010no-progress\n"));
        assert!(req.contains(&format!("0032want {w}\n")));
        assert_eq!(req.matches("have ").count(), MAX_HAVES);
        assert!(req.ends_with("0009done\n0000"));
    }

    #[test]
    fn fetch_answer_skips_sections_and_demultiplexes_the_pack() {
        let band = |b: u8, data: &[u8]| {
            let mut line = vec![b];
            line.extend_from_slice(data);
            let mut out = format!("{:04x}", line.len() + 4).into_bytes();
            out.extend(line);
            out
        };
        let bytes = [
            pkt("shallow-info\n"),
            pkt("unshallow x\n"),
            DELIM.to_vec(),
            pkt("packfile\n"),
            band(2, b"Enumerating objects\n"),
            band(1, b"PACK"),
            band(1, b"rest"),
            FLUSH.to_vec(),
        ]
        .concat();
        let mut answer = FetchAnswer::default();
        let mut pack = Vec::new();
        let mut done = false;
        for p in pkts(&bytes, 3) {
            match answer.take(p).unwrap() {
                Answer::Pack(d) => pack.extend_from_slice(&d),
                Answer::Done => done = true,
                Answer::More => {}
            }
        }
        assert!(done);
        assert_eq!(pack, b"PACKrest");

        let mut answer = FetchAnswer::default();
        answer
            .take(Pkt::Data(BytesMut::from(&b"packfile\n"[..])))
            .unwrap();
        assert_eq!(
            answer.take(Pkt::Data(BytesMut::from(
                &b"\x03upload-pack: not our ref\n"[..]
            ))),
            Err(ProtocolError::Remote("upload-pack: not our ref".into()))
        );
        let mut answer = FetchAnswer::default();
        answer
            .take(Pkt::Data(BytesMut::from(&b"acknowledgments\n"[..])))
            .unwrap();
        assert!(answer.take(Pkt::Flush).is_err(), "no pack");
    }
}
