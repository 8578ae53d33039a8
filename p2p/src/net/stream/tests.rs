use super::*;

#[test]
fn header_as_the_official_fetcher_sends_it() {
    let pkt = b"003dgit-upload-pack /zgqhS3obJHVRoCRkKLuZYt5MD7Af\0\0version=2\0";
    let (payload, used) = split_pkt_line(pkt).unwrap().unwrap();
    assert_eq!(used, pkt.len());
    let rid = parse_header(payload).unwrap();
    assert_eq!(rid.to_string(), "rad:zgqhS3obJHVRoCRkKLuZYt5MD7Af");
    // With rad: and a host field.
    let rid2 = parse_header(
        b"git-upload-pack /rad:zgqhS3obJHVRoCRkKLuZYt5MD7Af\0host=seed.example:8776\0version=2\0",
    )
    .unwrap();
    assert_eq!(rid, rid2);
}

#[test]
fn header_split_and_rejections() {
    let pkt = b"003dgit-upload-pack /zgqhS3obJHVRoCRkKLuZYt5MD7Af\0\0version=2\0";
    for cut in 0..pkt.len() {
        assert_eq!(split_pkt_line(&pkt[..cut]).unwrap(), None, "cut {cut}");
    }
    assert_eq!(split_pkt_line(b"zzzz"), Err(HeaderError::PktLine));
    assert_eq!(split_pkt_line(b"0003"), Err(HeaderError::PktLine));
    assert_eq!(split_pkt_line(b"ffff"), Err(HeaderError::TooLong));
    let ok = "zgqhS3obJHVRoCRkKLuZYt5MD7Af";
    for (bad, err) in [
        (
            format!("git-receive-pack /{ok}\0\0version=2\0"),
            HeaderError::Service,
        ),
        (
            format!("git-upload-pack {ok}\0\0version=2\0"),
            HeaderError::Rid,
        ),
        (
            "git-upload-pack /nope\0\0version=2\0".to_owned(),
            HeaderError::Rid,
        ),
        (format!("git-upload-pack /{ok}\0\0"), HeaderError::Version),
        (
            format!("git-upload-pack /{ok}\0\0version=1\0"),
            HeaderError::Version,
        ),
    ] {
        assert_eq!(parse_header(bad.as_bytes()), Err(err), "{bad:?}");
    }
}

fn pkt(line: &str) -> String {
    format!("{:04x}{line}", line.len() + 4)
}

fn ls_refs_request() -> Vec<u8> {
    format!(
        "{}{}0001{}{}0000",
        pkt("command=ls-refs\n"),
        pkt("agent=git/2.47.3\n"),
        pkt("peel\n"),
        pkt("ref-prefix refs/rad/\n")
    )
    .into_bytes()
}

fn fetch_request() -> Vec<u8> {
    format!(
        "{}0001{}{}0000",
        pkt("command=fetch\n"),
        pkt("want 1111111111111111111111111111111111111111\n"),
        pkt("done\n")
    )
    .into_bytes()
}

#[test]
fn requests_are_split_at_flushes_whatever_the_frames() {
    let a = ls_refs_request();
    let b = fetch_request();
    let all = [a.clone(), b.clone()].concat();
    for cut in 0..=all.len() {
        let mut requests = Requests::new(Vec::new());
        requests.push(&all[..cut]);
        let mut got = Vec::new();
        while let Some(r) = requests.next_request().unwrap() {
            got.push(r);
        }
        requests.push(&all[cut..]);
        while let Some(r) = requests.next_request().unwrap() {
            got.push(r);
        }
        assert_eq!(got, vec![a.clone(), b.clone()], "cut {cut}");
        assert!(requests.is_empty());
    }
    // One byte at a time: nothing before the flush's last byte.
    let mut requests = Requests::new(Vec::new());
    for (i, byte) in a.iter().enumerate() {
        requests.push(&[*byte]);
        let r = requests.next_request().unwrap();
        assert_eq!(r.is_some(), i == a.len() - 1, "byte {i}");
    }
}

#[test]
fn malformed_lengths_are_errors() {
    for bad in [
        &b"zzzz"[..],
        b"0002",
        b"0003",
        b"fff1",
        b"ffff",
        b"00 4",
        b"-001",
    ] {
        let mut requests = Requests::new(bad.to_vec());
        assert!(
            matches!(requests.next_request(), Err(RequestError::PktLine(_))),
            "{bad:?}"
        );
    }
    // An empty data line (`0004`) and the largest one are pkt-lines.
    let mut big = b"fff0".to_vec();
    big.resize(0xfff0, b'x');
    big.extend_from_slice(b"00040000");
    let mut requests = Requests::new(big.clone());
    assert_eq!(requests.next_request().unwrap(), Some(big));
}

/// Records requests; answers with `Err(result)` on the `fail`-th one.
#[derive(Default)]
struct Recorder {
    got: Vec<Vec<u8>>,
    fail: Option<(usize, &'static str)>,
}

impl Respond for Recorder {
    async fn respond(&mut self, request: Vec<u8>) -> Result<(), &'static str> {
        self.got.push(request);
        match self.fail {
            Some((n, result)) if n == self.got.len() => Err(result),
            _ => Ok(()),
        }
    }
}

const LIMITS: Limits = Limits {
    idle: Duration::from_secs(5),
    max_request: 64 * 1024,
};

/// Runs the loop over `frames` (then Eof unless `eof` is false) after `header_rest`.
async fn run(
    header_rest: &[u8],
    frames: Vec<Vec<u8>>,
    eof: bool,
    limits: Limits,
    recorder: &mut Recorder,
) -> &'static str {
    let (tx, mut input) = super::super::input::channel(None);
    for f in frames {
        tx.try_send(f).unwrap();
    }
    let keep = (!eof).then_some(tx);
    let result = command_loop(&mut input, header_rest.to_vec(), limits, recorder).await;
    drop(keep);
    result
}

#[tokio::test]
async fn several_commands_in_split_frames_until_eof() {
    let a = ls_refs_request();
    let b = fetch_request();
    let all = [a.clone(), b.clone(), a.clone()].concat();
    // The first bytes came with the header; the rest in uneven frames.
    let frames = all[5..].chunks(7).map(<[u8]>::to_vec).collect();
    let mut rec = Recorder::default();
    let result = run(&all[..5], frames, true, LIMITS, &mut rec).await;
    assert_eq!(result, "ok");
    assert_eq!(rec.got, vec![a.clone(), b, a]);
}

#[tokio::test]
async fn a_flush_alone_ends_the_stream_like_git() {
    let a = ls_refs_request();
    let mut rec = Recorder::default();
    let frames = vec![a.clone(), b"0000".to_vec(), a.clone()];
    let result = run(b"", frames, false, LIMITS, &mut rec).await;
    assert_eq!(result, "ok");
    assert_eq!(rec.got, vec![a]);
}

#[tokio::test]
async fn malformed_truncated_oversize_silent_and_failing_streams_close() {
    let a = ls_refs_request();
    // Garbage after a good request: the good one is answered, then the stream closes.
    let mut rec = Recorder::default();
    let frames = vec![a.clone(), b"GET / HTTP/1.1\r\n".to_vec()];
    assert_eq!(
        run(b"", frames, true, LIMITS, &mut rec).await,
        "bad_request"
    );
    assert_eq!(rec.got, vec![a.clone()]);
    // Eof inside a request.
    let mut rec = Recorder::default();
    let frames = vec![a[..a.len() - 2].to_vec()];
    assert_eq!(
        run(b"", frames, true, LIMITS, &mut rec).await,
        "bad_request"
    );
    assert!(rec.got.is_empty());
    // More than `max_request` bytes in all, even in whole requests.
    let small = Limits {
        max_request: (2 * a.len()) as u64,
        ..LIMITS
    };
    let mut rec = Recorder::default();
    let frames = vec![a.clone(), a.clone(), a.clone()];
    assert_eq!(run(b"", frames, true, small, &mut rec).await, "too_large");
    assert_eq!(rec.got.len(), 2);
    // A request that never ends: the stream is cut at the bound, never buffered beyond.
    let mut rec = Recorder::default();
    let endless = vec![pkt("have 1111111111111111111111111111111111111111\n").into_bytes(); 2000];
    assert_eq!(run(b"", endless, false, small, &mut rec).await, "too_large");
    assert!(rec.got.is_empty());
    // Silence.
    let quick = Limits {
        idle: Duration::from_millis(50),
        ..LIMITS
    };
    let mut rec = Recorder::default();
    assert_eq!(
        run(b"", vec![a[..9].to_vec()], false, quick, &mut rec).await,
        "timeout"
    );
    // An answer that fails ends the stream with its result.
    let mut rec = Recorder {
        fail: Some((2, "refused_busy")),
        ..Recorder::default()
    };
    let frames = vec![a.clone(), a.clone(), a.clone()];
    assert_eq!(
        run(b"", frames, true, LIMITS, &mut rec).await,
        "refused_busy"
    );
    assert_eq!(rec.got.len(), 2);
}
