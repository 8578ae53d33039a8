//! The public edge's identity and visibility points (issue 25 §5): what a stranger may learn
//! or fetch of a private repository. seedd as a process; real `git`, fixtures made by the real
//! `rad`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use seedd_tests::*;
use serde_json::json;

/// A private repository whose owner tenant has used up its egress is 404 like an unknown one,
/// not 429 (which would tell a stranger that the seed holds it); the tenant's public
/// repository is 429.
#[test]
fn a_private_repository_of_a_tenant_out_of_egress_is_404_not_429() {
    let f = fixtures();
    let seed = Seed::start(SeedOptions {
        repos: vec!["small-fixture".into(), "secret-fixture".into()],
        ..SeedOptions::default()
    });
    let (small, secret) = (f.rid("small-fixture"), f.rid("secret-fixture"));
    let (status, v) = seed.admin(
        "POST",
        "/api/v1/tenants",
        Some(json!({ "name": "acme", "hosts": [] })),
    );
    assert_eq!(status, 201, "{v}");
    for rid in [&small, &secret] {
        let (status, v) = seed.admin(
            "POST",
            &format!("/api/v1/repos/{rid}/seed"),
            Some(json!({ "tenant": "acme" })),
        );
        assert_eq!(status, 200, "{rid}: {v}");
    }
    let refs = |rid: &str| seed.url(&format!("/{rid}.git/info/refs?service=git-upload-pack"));
    // Before the quota: the private one is 404, the public one served.
    assert_eq!(http_get(&refs(&secret), &[]).unwrap().0, 404);
    assert_eq!(http_get(&refs(&small), &[]).unwrap().0, 200);
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/quota",
        Some(json!({ "egress_bytes_per_day": 100 })),
    );
    wait_for("egress quota used up", Duration::from_secs(10), || {
        (http_get(&refs(&small), &[]).unwrap().0 == 429).then_some(())
    });
    // The quota is used up: the private repository still looks unknown, over both git
    // endpoints.
    let (status, body) = http_get(&refs(&secret), &[]).unwrap();
    assert_eq!(
        status, 404,
        "private repository of an exhausted tenant: {body}"
    );
    let unknown = rid_from_hex(&"11".repeat(20));
    assert_eq!(http_get(&refs(&unknown), &[]).unwrap().0, 404);
    let (status, _) = http_post(
        &seed.url(&format!("/{secret}.git/git-upload-pack")),
        &[
            ("content-type", "application/x-git-upload-pack-request"),
            ("git-protocol", "version=2"),
        ],
        format!("{}0000", pkt("command=ls-refs\n")).as_bytes(),
    )
    .unwrap();
    assert_eq!(status, 404);
}

/// An open Radicle git stream is authorised again before every request: a stream opened while
/// the repository could be served is refused (closed) at its next request once the owner
/// tenant's egress is used up — without answering it.
#[test]
fn an_open_radicle_stream_is_authorised_again_for_every_request() {
    use seedd_proto::crypto::Keypair;
    use seedd_proto::wire::{Control, Frame, Link, StreamId};
    use seedd_tests::raw::{self, read_until};

    let f = fixtures();
    let rid = f.rid("heartwood-fixture");
    let seed = Seed::start(SeedOptions {
        repos: vec!["heartwood-fixture".into()],
        p2p_config: "stream_idle_timeout_secs = 30\n".into(),
        ..SeedOptions::allowing()
    });
    let (status, v) = seed.admin(
        "POST",
        "/api/v1/tenants",
        Some(json!({ "name": "acme", "hosts": [] })),
    );
    assert_eq!(status, 201, "{v}");
    let (status, v) = seed.admin(
        "POST",
        &format!("/api/v1/repos/{rid}/seed"),
        Some(json!({ "tenant": "acme" })),
    );
    assert_eq!(status, 200, "{v}");

    let key = Keypair::mock(310);
    let mut s = raw::connect(&seed, "127.0.0.9", &key);
    let id = StreamId::git(Link::Outbound, 1).unwrap();
    raw::send_frame(
        &mut s,
        Frame::control(Link::Outbound, Control::Open { stream: id }),
    );
    let header = format!(
        "git-upload-pack /{}\0\0version=2\0",
        rid.trim_start_matches("rad:")
    );
    raw::send_frame(&mut s, Frame::git(id, pkt(&header).into_bytes()));
    let git_bytes = |frames: &[Frame]| -> usize {
        frames
            .iter()
            .map(|f| match f {
                Frame::Git { stream, data } if *stream == id => data.len(),
                _ => 0,
            })
            .sum()
    };
    let closed = |frames: &[Frame]| {
        frames.iter().any(|f| {
            matches!(f, Frame::Control { control: Control::Close { stream }, .. } if *stream == id)
        })
    };
    // The capability advertisement: the stream is open and authorised.
    let (frames, _) = read_until(&mut s, Duration::from_secs(10), |fs| git_bytes(fs) > 0);
    assert!(git_bytes(&frames) > 0, "no capability advertisement");
    let ls_refs = format!(
        "{}{}0001{}0000",
        pkt("command=ls-refs\n"),
        pkt("agent=git/2.47.3\n"),
        pkt("ref-prefix refs/\n"),
    );
    // One request answered while the quota allows it.
    raw::send_frame(&mut s, Frame::git(id, ls_refs.clone().into_bytes()));
    let (frames, _) = read_until(&mut s, Duration::from_secs(10), |fs| git_bytes(fs) > 100);
    assert!(git_bytes(&frames) > 100, "ls-refs not answered: {frames:?}");
    // The owner's egress is used up (the answer above spent more than 1 byte).
    seed.admin_ok(
        "PUT",
        "/api/v1/tenants/acme/quota",
        Some(json!({ "egress_bytes_per_day": 1 })),
    );
    let refused = || seed.metric("seedd_p2p_git_serves_total", &["result=\"refused_quota\""]);
    assert_eq!(refused(), 0.0);
    raw::send_frame(&mut s, Frame::git(id, ls_refs.into_bytes()));
    let (frames, _) = read_until(&mut s, Duration::from_secs(10), closed);
    assert!(closed(&frames), "stream not closed at its next request");
    assert_eq!(
        git_bytes(&frames),
        0,
        "the request was answered: {frames:?}"
    );
    assert_eq!(refused(), 1.0);
}

/// A real user makes a public repository private with `rad id update` and pushes a new commit
/// in the same announcement. From the moment the fetch moves the refs on the seed — held here
/// for 5 s before the re-index (`SEEDD_TEST_PAUSE_AFTER_APPLY_MS`, test builds only) — the
/// repository is 404 over HTTP and in the web API: nothing of that fetch is served as public.
#[test]
fn a_repository_made_private_serves_nothing_of_that_fetch() {
    let seed = Seed::start(SeedOptions {
        env: vec![("SEEDD_TEST_PAUSE_AFTER_APPLY_MS".into(), "5000".into())],
        ..SeedOptions::allowing()
    });
    let seed_did = format!("did:key:{}", seed.nid());
    let gina = RadNode::start("gina", &[seed.p2p_peer()]);
    let tmp = tempfile::tempdir().unwrap();
    let (proj, rid) = gina.project(tmp.path(), "going-private");
    let held = seed.repo_path(&rid);
    let info_refs = seed.url(&format!("/{rid}.git/info/refs?service=git-upload-pack"));
    wait_for("replicated and served", Duration::from_secs(60), || {
        (http_get(&info_refs, &[]).unwrap().0 == 200).then_some(())
    });
    let theirs = gina.repo_path(&rid);
    // Private (the seed allowed) and a new commit, announced together.
    succeeded(
        gina.rad_in(
            &proj,
            &[
                "id",
                "update",
                "--no-confirm",
                "--title",
                "private",
                "--visibility",
                "private",
                "--allow",
                &seed_did,
            ],
        ),
        "rad id update",
    );
    succeeded(
        gina.git_in(&proj, &["commit", "-q", "--allow-empty", "-m", "secret"]),
        "git commit",
    );
    succeeded(
        gina.git_in(&proj, &["push", "-q", "rad", "main"]),
        "git push",
    );
    let secret = git_at(
        &theirs,
        &[
            "rev-parse",
            &format!("refs/namespaces/{}/refs/heads/main", gina.nid),
        ],
    );
    let private_id = git_at(&theirs, &["rev-parse", "refs/rad/id"]);
    let _ = gina.rad_in(&proj, &["sync", "--announce", "--timeout", "5s"]);
    // The refs moved on the seed: the fetch is now held before its re-index.
    wait_for(
        "the fetch applied on the seed",
        Duration::from_secs(60),
        || {
            let id = git_at(&held, &["rev-parse", "refs/rad/id"]);
            (id == private_id).then_some(())
        },
    );
    let (status, body) = http_get(&info_refs, &[]).unwrap();
    assert_eq!(status, 404, "served while being made private: {body}");
    assert!(!body.contains(&secret));
    let (status, body) = http_get(&seed.url(&format!("/api/v1/repos/{rid}")), &[]).unwrap();
    assert_eq!(status, 404, "web API served it: {body}");
    // And after the re-index, still private.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(http_get(&info_refs, &[]).unwrap().0, 404);
    assert!(
        seed.logs().contains("hidden before its refs move"),
        "{}",
        seed.logs()
    );
}
