use std::io::Write;
use std::path::Path;
use std::process::Command;

use bytes::Bytes;

use super::*;
use crate::serve::packcache::tail::TailError;
use crate::serve::{GitServer, StreamLimits, View};
use seedd_proto::crypto::RepoId;

fn pkt(line: &str) -> String {
    format!("{:04x}{line}", line.len() + 4)
}

fn key(n: u8) -> Key {
    let body = format!(
        "{}0001{}{}0000",
        pkt("command=fetch\n"),
        pkt(&format!("want {}\n", hex::encode([n; 20]))),
        pkt("done\n")
    );
    let request = Normalised::parse(true, body.as_bytes()).unwrap();
    Key::new(
        &RepoId::from_oid_bytes([1; 20]),
        View::Canonical,
        b"f",
        &request,
    )
}

fn settings(max_bytes: u64, admit_first: bool) -> Settings {
    Settings {
        max_bytes,
        max_age: Duration::from_secs(3600),
        admit_first,
        max_generations_per_client: 2,
    }
}

fn open(dir: &Path, s: Settings) -> (Arc<PackCache>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new().unwrap());
    let cache = PackCache::open(dir.join("packs"), s, Some(metrics.clone())).unwrap();
    (Arc::new(cache), metrics)
}

/// Claims `key` and writes `data` as its whole response.
fn fill(cache: &Arc<PackCache>, key: Key, data: &[u8]) {
    let Lookup::Claim(mut claim, _) = cache.lookup(key) else {
        panic!("expected a claim");
    };
    claim.file().as_ref().write_all(data).unwrap();
    claim.wrote(data.len() as u64);
    claim.complete(Duration::from_millis(1));
}

async fn read_all(mut tail: Tail) -> Result<Vec<u8>, TailError> {
    let mut out = Vec::new();
    while let Some(chunk) = tail.next_chunk().await {
        out.extend_from_slice(&chunk?);
    }
    Ok(out)
}

fn files(cache: &PackCache) -> Vec<(String, u64)> {
    let mut v: Vec<_> = std::fs::read_dir(cache.dir())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn followers_share_one_generation_and_later_requests_hit() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, metrics) = open(dir.path(), settings(1 << 20, true));
    let Lookup::Claim(mut claim, first) = cache.lookup(key(1)) else {
        panic!("expected a claim");
    };
    claim.file().as_ref().write_all(b"hello ").unwrap();
    claim.wrote(6);
    let Lookup::Follow(follower) = cache.lookup(key(1)) else {
        panic!("expected to follow the generation");
    };
    let readers = [first, follower].map(|t| tokio::spawn(read_all(t)));
    claim.file().as_ref().write_all(b"world").unwrap();
    claim.wrote(5);
    claim.complete(Duration::from_millis(3));
    for r in readers {
        assert_eq!(r.await.unwrap().unwrap(), b"hello world");
    }
    let Lookup::Hit(hit) = cache.lookup(key(1)) else {
        panic!("expected a hit");
    };
    let read = metrics.pack_cache.read_bytes.get();
    assert_eq!(read_all(hit).await.unwrap(), b"hello world");
    // A finished file is read with positional reads (never mapped).
    assert_eq!(metrics.pack_cache.read_bytes.get() - read, 11);
    let m = &metrics.pack_cache;
    assert_eq!((m.misses.get(), m.hits.get()), (1, 2));
    assert_eq!(m.served_bytes.get(), 33);
    assert_eq!(m.generation.get_sample_count(), 1);
    assert_eq!(m.bytes.get(), 11);
    assert_eq!(cache.bytes(), 11);
    // Only the finished file is on disk, under its final name.
    assert_eq!(files(&cache), vec![(format!("{}.pack", key(1).hex()), 11)]);
}

#[tokio::test]
async fn second_sighting_admission_serves_the_first_request_directly() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, metrics) = open(dir.path(), settings(1 << 20, false));
    assert!(matches!(cache.lookup(key(1)), Lookup::Bypass));
    assert!(matches!(cache.lookup(key(2)), Lookup::Bypass));
    assert!(
        files(&cache).is_empty(),
        "nothing written on a first sighting"
    );
    assert!(matches!(cache.lookup(key(1)), Lookup::Claim(..)));
    assert_eq!(metrics.pack_cache.misses.get(), 3);
}

#[tokio::test]
async fn the_byte_budget_evicts_the_least_recently_used() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, metrics) = open(dir.path(), settings(250, true));
    fill(&cache, key(1), &[1; 100]);
    fill(&cache, key(2), &[2; 100]);
    // 1 is used again: 2 is now the least recently used.
    assert!(matches!(cache.lookup(key(1)), Lookup::Hit(_)));
    fill(&cache, key(3), &[3; 100]);
    assert_eq!(cache.bytes(), 200);
    assert_eq!(metrics.pack_cache.evictions.get(), 1);
    assert!(matches!(cache.lookup(key(1)), Lookup::Hit(_)));
    assert!(matches!(cache.lookup(key(3)), Lookup::Hit(_)));
    let on_disk: u64 = files(&cache).iter().map(|(_, n)| n).sum();
    assert_eq!(on_disk, 200);
    // 2 is gone: generated again.
    assert!(matches!(cache.lookup(key(2)), Lookup::Claim(..)));
}

#[tokio::test]
async fn a_response_over_the_budget_is_served_but_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, _) = open(dir.path(), settings(10, true));
    let Lookup::Claim(mut claim, tail) = cache.lookup(key(1)) else {
        panic!("expected a claim");
    };
    let reader = tokio::spawn(read_all(tail));
    claim.file().as_ref().write_all(&[7; 64]).unwrap();
    claim.wrote(64);
    claim.complete(Duration::from_millis(1));
    assert_eq!(reader.await.unwrap().unwrap(), vec![7; 64]);
    assert_eq!(cache.bytes(), 0);
    assert!(files(&cache).is_empty());
}

#[tokio::test]
async fn old_entries_are_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(1 << 20, true);
    s.max_age = Duration::from_millis(50);
    let (cache, metrics) = open(dir.path(), s);
    fill(&cache, key(1), b"old");
    assert!(matches!(cache.lookup(key(1)), Lookup::Hit(_)));
    std::thread::sleep(Duration::from_millis(80));
    assert!(matches!(cache.lookup(key(1)), Lookup::Claim(..)));
    assert_eq!(metrics.pack_cache.evictions.get(), 1);
    // The claim was dropped (nothing generated): no file left.
    assert!(files(&cache).is_empty());
}

#[tokio::test]
async fn a_failed_generation_is_removed_and_its_readers_know() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, _) = open(dir.path(), settings(1 << 20, true));
    let Lookup::Claim(mut claim, started) = cache.lookup(key(1)) else {
        panic!("expected a claim");
    };
    let Lookup::Follow(mut waiting) = cache.lookup(key(1)) else {
        panic!("expected to follow");
    };
    claim.file().as_ref().write_all(b"part").unwrap();
    claim.wrote(4);
    let reader = tokio::spawn(read_all(started));
    tokio::time::sleep(Duration::from_millis(20)).await;
    claim.fail();
    assert!(matches!(reader.await.unwrap(), Err(TailError::Failed)));
    // A reader that has not sent anything yet answers another way (directly).
    assert!(matches!(waiting.ready().await, Err(TailError::Failed)));
    assert!(files(&cache).is_empty(), "the partial file is removed");
    // The next request generates again.
    let Lookup::Claim(claim, mut tail) = cache.lookup(key(1)) else {
        panic!("expected a new claim");
    };
    drop(claim); // e.g. refused a pack slot
    assert!(tail.ready().await.is_err());
    assert!(files(&cache).is_empty());
}

#[test]
fn opening_discards_what_an_earlier_run_left() {
    let dir = tempfile::tempdir().unwrap();
    let packs = dir.path().join("packs");
    std::fs::create_dir_all(&packs).unwrap();
    std::fs::write(packs.join("x.pack"), b"stale").unwrap();
    std::fs::write(packs.join("y.tmp-3"), b"half").unwrap();
    let (cache, _) = open(dir.path(), settings(1 << 20, true));
    assert!(files(&cache).is_empty());
}

fn git_repo(dir: &Path) -> (PathBuf, String) {
    let repo = dir.join("repo.git");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let work = dir.join("work");
    git(&["init", "-q", work.to_str().unwrap()]);
    std::fs::write(work.join("a"), "a\n").unwrap();
    git(&["-C", work.to_str().unwrap(), "add", "a"]);
    git(&["-C", work.to_str().unwrap(), "commit", "-q", "-m", "a"]);
    git(&[
        "clone",
        "-q",
        "--bare",
        work.to_str().unwrap(),
        repo.to_str().unwrap(),
    ]);
    let head = git(&["-C", repo.to_str().unwrap(), "rev-parse", "HEAD"]);
    (repo, head)
}

fn job(dir: &Path, repo: PathBuf, head: &str, metrics: Arc<Metrics>) -> generate::Job {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let git = GitServer::new(
        "git".into(),
        home,
        StreamLimits {
            idle: Duration::from_secs(30),
            total: Duration::from_secs(60),
        },
        metrics,
    );
    let request = format!(
        "{}0001{}{}{}0000",
        pkt("command=fetch\n"),
        pkt("no-progress\n"),
        pkt(&format!("want {head}\n")),
        pkt("done\n")
    );
    generate::Job {
        git,
        repo,
        service: crate::serve::Service::UploadPack,
        view: View::All,
        protocol: Some("version=2".into()),
        request: Bytes::from(request),
    }
}

#[tokio::test]
async fn a_generation_writes_gits_response_and_completes() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, head) = git_repo(dir.path());
    let (cache, metrics) = open(dir.path(), settings(1 << 20, true));
    let Lookup::Claim(claim, tail) = cache.lookup(key(1)) else {
        panic!("expected a claim");
    };
    generate::spawn(claim, job(dir.path(), repo, &head, metrics.clone()), ());
    let body = read_all(tail).await.unwrap();
    assert!(
        body.starts_with(b"000dpackfile\n"),
        "{:?}",
        &body[..20.min(body.len())]
    );
    assert!(body.ends_with(b"0000"));
    assert!(matches!(cache.lookup(key(1)), Lookup::Hit(_)));
    assert_eq!(metrics.pack_cache.generation.get_sample_count(), 1);
    assert_eq!(metrics.packs_in_flight.get(), 0);
}

/// A full disk: every write fails (`/dev/full`). The generation fails cleanly: readers get an
/// error or answer directly, nothing is left, the next request generates again.
#[tokio::test]
async fn a_write_error_fails_the_generation_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, head) = git_repo(dir.path());
    let (cache, metrics) = open(dir.path(), settings(1 << 20, true));
    let Lookup::Claim(mut claim, mut tail) = cache.lookup(key(1)) else {
        panic!("expected a claim");
    };
    claim.file = Arc::new(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    );
    generate::spawn(claim, job(dir.path(), repo, &head, metrics.clone()), ());
    assert!(matches!(tail.ready().await, Err(TailError::Failed)));
    assert!(files(&cache).is_empty());
    assert_eq!(metrics.pack_cache.generation.get_sample_count(), 0);
    assert!(matches!(cache.lookup(key(1)), Lookup::Claim(..)));
}

/// Issue 25 §4: every reader gone (the client left) before a second one followed: git is
/// killed, the file removed, the next request claims again. A generation a second reader
/// followed is popular: it completes after both left, for later requests.
#[tokio::test]
async fn an_abandoned_generation_is_cancelled_unless_a_second_reader_followed() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, head) = git_repo(dir.path());
    let (cache, metrics) = open(dir.path(), settings(1 << 20, true));
    // A process that would run for a minute: cut as soon as its only reader goes.
    let (mut claim, tail, mut child) = claim_and_write(&cache, 9, "printf abc; sleep 60");
    let started = std::time::Instant::now();
    let reader = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(tail);
    });
    let r = follow(&mut child, &mut claim, Duration::from_secs(30)).await;
    assert!(matches!(r, Err(generate::GenError::Abandoned)), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
    reader.await.unwrap();
    claim.fail();
    assert!(files(&cache).is_empty(), "{:?}", files(&cache));

    // Through `generate::spawn`: the process group is killed, counted, the file removed.
    let Lookup::Claim(claim, tail) = cache.lookup(key(1)) else {
        panic!("expected a claim");
    };
    drop(tail);
    generate::spawn(
        claim,
        job(dir.path(), repo.clone(), &head, metrics.clone()),
        (),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while metrics.pack_cache.generations_abandoned.get() == 0 {
        assert!(std::time::Instant::now() < deadline, "never abandoned");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(files(&cache).is_empty(), "{:?}", files(&cache));
    assert_eq!(cache.inflight(), 0);
    assert_eq!(metrics.pack_cache.generation.get_sample_count(), 0);

    // Popular: a follower came; both leave; it completes.
    let Lookup::Claim(claim, first) = cache.lookup(key(1)) else {
        panic!("expected a claim again");
    };
    let Lookup::Follow(second) = cache.lookup(key(1)) else {
        panic!("expected a follower");
    };
    drop((first, second));
    generate::spawn(claim, job(dir.path(), repo, &head, metrics.clone()), ());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while metrics.pack_cache.generation.get_sample_count() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "generation never completed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Lookup::Hit(hit) = cache.lookup(key(1)) else {
        panic!("expected a hit");
    };
    assert!(read_all(hit).await.unwrap().starts_with(b"000dpackfile\n"));
    assert_eq!(metrics.pack_cache.generations_abandoned.get(), 1);
}

/// Issue 25 §4: one client may run `max_generations_per_client` generations; past that its new
/// keys are answered directly (counted), others' are not affected, and an ended generation
/// frees its place.
#[tokio::test]
async fn a_client_runs_a_bounded_number_of_generations() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, metrics) = open(dir.path(), settings(1 << 20, true));
    let claim = |k: u8, client: u128| match cache.lookup_for(key(k), Some(client)) {
        Lookup::Claim(c, t) => Some((c, t)),
        Lookup::Bypass => None,
        _ => panic!("unexpected lookup"),
    };
    let a = claim(1, 7).unwrap();
    let _b = claim(2, 7).unwrap();
    assert!(claim(3, 7).is_none(), "a third generation of one client");
    assert!(claim(4, 8).is_some(), "another client");
    let refused = &metrics.pack_cache.generations_refused;
    assert_eq!(refused.with_label_values(&["per_client"]).get(), 1);
    // A follower of a running generation is not a new one.
    assert!(matches!(
        cache.lookup_for(key(1), Some(7)),
        Lookup::Follow(_)
    ));
    drop(a);
    assert!(claim(3, 7).is_some(), "a place freed");
}

/// Issue 25 §4: files being written count in `max_bytes`: finished entries make room for them,
/// and while they alone fill the budget no new generation starts (answered directly).
#[tokio::test]
async fn files_being_written_count_in_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, metrics) = open(dir.path(), settings(100, true));
    fill(&cache, key(1), &[1; 60]);
    assert_eq!(cache.bytes(), 60);
    let Lookup::Claim(mut claim, _reader) = cache.lookup(key(2)) else {
        panic!("expected a claim");
    };
    claim.file().as_ref().write_all(&[2; 50]).unwrap();
    claim.wrote(50);
    // 60 finished + 50 being written > 100: the finished one goes.
    assert_eq!(cache.bytes(), 0);
    assert_eq!(cache.inflight(), 50);
    assert!(matches!(cache.lookup(key(1)), Lookup::Claim(..)), "evicted");
    claim.file().as_ref().write_all(&[2; 50]).unwrap();
    claim.wrote(50);
    assert!(
        matches!(cache.lookup(key(3)), Lookup::Bypass),
        "budget full"
    );
    let refused = &metrics.pack_cache.generations_refused;
    assert_eq!(refused.with_label_values(&["budget"]).get(), 1);
    claim.complete(Duration::from_millis(1));
    assert_eq!(cache.inflight(), 0);
    assert_eq!(cache.bytes(), 100);
    assert!(matches!(cache.lookup(key(3)), Lookup::Claim(..)));
}

/// The flow HTTP and streams share: a claim runs the job once its permits come (held until
/// git is done), later requests read the file; a refused claim fails the entry; not admitted
/// yet is `None` (answer directly).
#[tokio::test]
async fn reader_claims_with_permits_and_refusals_fail_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, head) = git_repo(dir.path());
    let (cache, metrics) = open(dir.path(), settings(1 << 20, true));
    let slots = Arc::new(tokio::sync::Semaphore::new(1));
    // Refused: the error comes back, the job never runs, the next request claims again.
    let refused = reader(
        &cache,
        key(1),
        None,
        || -> generate::Job { panic!("no job without permits") },
        || async { Err::<(), _>("busy") },
    )
    .await;
    assert_eq!(refused.err(), Some("busy"));
    assert!(files(&cache).is_empty());
    // Claimed: the permit is held while git runs, then released.
    let permits = || async {
        let p = slots.clone().try_acquire_owned().map_err(|_| "busy")?;
        Ok::<_, &str>(p)
    };
    let job = || job(dir.path(), repo.clone(), &head, metrics.clone());
    let tail = reader(&cache, key(1), None, job, permits)
        .await
        .unwrap()
        .unwrap();
    let body = read_all(tail).await.unwrap();
    assert!(body.starts_with(b"000dpackfile\n"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while slots.available_permits() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "permit never released"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A hit: no job, no permits.
    let tail = reader(
        &cache,
        key(1),
        None,
        || -> generate::Job { panic!("a hit runs nothing") },
        || async { Err::<(), &str>("a hit takes no permit") },
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(read_all(tail).await.unwrap(), body);
    // Second-sighting admission: the first request is answered directly.
    let other = tempfile::tempdir().unwrap();
    let (cache, _) = open(other.path(), settings(1 << 20, false));
    let first = reader(
        &cache,
        key(2),
        None,
        || -> generate::Job { panic!("not admitted") },
        || async { Ok::<(), &str>(()) },
    )
    .await
    .unwrap();
    assert!(first.is_none());
}

/// Following a process that writes the claim's file itself: every byte it wrote reaches the
/// readers, while it writes and at its exit; a process that stays silent for `idle` is an
/// error; one that fails is an error; nothing passes through seedd.
#[tokio::test]
async fn the_generation_follows_what_git_writes_and_gives_up_on_silence() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, _) = open(dir.path(), settings(1 << 30, true));
    // 40 pieces of 70,000 bytes, 5 ms apart: readers see it grow, then complete.
    let (mut claim, mut tail, mut child) = claim_and_write(
        &cache,
        1,
        "i=0; while [ $i -lt 40 ]; do head -c 70000 /dev/zero | tr '\\0' x; sleep 0.005; i=$((i+1)); done",
    );
    let first = tokio::spawn(async move {
        tail.ready().await.unwrap();
        let first = tail.next_chunk().await.unwrap().unwrap().len();
        (first, read_all(tail).await)
    });
    let r = follow(&mut child, &mut claim, Duration::from_secs(10)).await;
    assert_eq!(r.unwrap(), 40 * 70_000);
    claim.complete(Duration::from_millis(1));
    let (first, rest) = first.await.unwrap();
    let rest = rest.unwrap();
    assert!(first < 40 * 70_000, "the reader started before the end");
    assert_eq!(first + rest.len(), 40 * 70_000);
    assert!(rest.iter().all(|b| *b == b'x'));

    // Silent for longer than `idle`.
    let (mut claim, _reader, mut child) = claim_and_write(&cache, 2, "printf abc; sleep 30");
    let started = std::time::Instant::now();
    let r = follow(&mut child, &mut claim, Duration::from_millis(300)).await;
    assert!(matches!(r, Err(generate::GenError::Idle(_))), "{r:?}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(started.elapsed() < Duration::from_secs(20));

    // A failing process.
    let (mut claim, _reader, mut child) = claim_and_write(&cache, 3, "printf abc; exit 3");
    let r = follow(&mut child, &mut claim, Duration::from_secs(10)).await;
    assert!(matches!(r, Err(generate::GenError::Git(_))), "{r:?}");
}

/// Claims `key(k)` and starts `script` with the claim's file as its stdout.
fn claim_and_write(
    cache: &Arc<PackCache>,
    k: u8,
    script: &str,
) -> (Claim, Tail, tokio::process::Child) {
    let Lookup::Claim(claim, tail) = cache.lookup(key(k)) else {
        panic!("expected a claim");
    };
    let child = tokio::process::Command::new("sh")
        .args(["-c", script])
        .stdout(claim.file().try_clone().unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    (claim, tail, child)
}

/// [`generate::follow`] with `idle` and a minute in all.
async fn follow(
    child: &mut tokio::process::Child,
    claim: &mut Claim,
    idle: Duration,
) -> Result<u64, generate::GenError> {
    generate::follow(child, claim, idle, Duration::from_secs(60)).await
}
