//! Differential tests: `renames::detect` against `git diff -M -C`.

use std::collections::BTreeMap;
use std::path::Path;

use super::support::{file, Obj, Repo, Rng};
use super::Limits;

fn p(s: &str) -> String {
    s.to_string()
}

/// `n` lines of 9 bytes: "{tag}{i:03}\n" with a 5-byte tag.
fn lines(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{tag}{i:03}\n")).collect()
}

/// `base` with the last `k` lines replaced by lines of the same length.
fn edit_tail(base: &[String], k: usize) -> Vec<u8> {
    let n = base.len();
    let mut out: Vec<String> = base[..n - k].to_vec();
    out.extend((0..k).map(|i| format!("EDIT {i:03}\n")));
    out.concat().into_bytes()
}

fn cat(lines: &[String]) -> Vec<u8> {
    lines.concat().into_bytes()
}

#[test]
fn exact_and_edited_moves() {
    let mut r = Repo::new();
    let l1 = lines("libr ", 30);
    let l3 = lines("modu ", 40);
    let a = vec![
        (p("README"), file("hello\n")),
        (p("src/lib.rs"), file(cat(&l1))),
        (p("x/mod.rs"), file(cat(&l3))),
    ];
    let b = vec![
        (p("README"), file("hello\n")),
        (p("lib/lib.rs"), file(cat(&l1))),
        (p("y/mod.rs"), file(edit_tail(&l3, 8))),
    ];
    let out = r.case(&a, &b);
    assert_eq!(
        out,
        vec!["R100\tsrc/lib.rs\tlib/lib.rs", "R080\tx/mod.rs\ty/mod.rs"]
    );
}

#[test]
fn similarity_threshold() {
    let mut r = Repo::new();
    let base = lines("line ", 100);
    // 50 of 100 equal-length lines kept: exactly 30000 = 50% -> rename.
    let out = r.case(
        &[(p("old"), file(cat(&base)))],
        &[(p("new"), file(edit_tail(&base, 50)))],
    );
    assert_eq!(out, vec!["R050\told\tnew"]);
    // 49 kept: 29400 -> no rename.
    let out = r.case(
        &[(p("old"), file(cat(&base)))],
        &[(p("new"), file(edit_tail(&base, 51)))],
    );
    assert_eq!(out, vec!["A\tnew", "D\told"]);
    // Size pre-check: 100 lines vs 201 lines can never reach 50%.
    let mut big = base.clone();
    big.extend(lines("more ", 101));
    let out = r.case(
        &[(p("old"), file(cat(&base)))],
        &[(p("new"), file(cat(&big)))],
    );
    assert_eq!(out, vec!["A\tnew", "D\told"]);
    // 200 lines: the pre-check passes and all of old is in new -> 50%.
    big.pop();
    let out = r.case(
        &[(p("old"), file(cat(&base)))],
        &[(p("new"), file(cat(&big)))],
    );
    assert_eq!(out, vec!["R050\told\tnew"]);
}

#[test]
fn copies_from_modified_files() {
    let mut r = Repo::new();
    let l = lines("copy ", 20);
    let a = vec![(p("f"), file(cat(&l)))];
    let b = vec![
        (p("f"), file(edit_tail(&l, 2))),
        (p("g"), file(edit_tail(&l, 5))),
        (p("h"), file(cat(&l))),
    ];
    let out = r.case(&a, &b);
    assert_eq!(out, vec!["M\tf", "C075\tf\tg", "C100\tf\th"]);
}

#[test]
fn one_deleted_source_several_destinations() {
    let mut r = Repo::new();
    let l = lines("dest ", 20);
    let a = vec![(p("s"), file(cat(&l)))];
    let b = vec![
        (p("a1"), file(cat(&l))),
        (p("m1"), file(cat(&l))),
        (p("z1"), file(cat(&l))),
    ];
    let out = r.case(&a, &b);
    assert_eq!(out, vec!["C100\ts\ta1", "C100\ts\tm1", "R100\ts\tz1"]);
    // Inexact: the rename goes to the best match, the last in path order
    // becomes the R in the listing.
    let b = vec![
        (p("a1"), file(edit_tail(&l, 2))),
        (p("m1"), file(edit_tail(&l, 6))),
        (p("z1"), file(edit_tail(&l, 4))),
    ];
    let out = r.case(&a, &b);
    assert_eq!(out, vec!["C090\ts\ta1", "C070\ts\tm1", "R080\ts\tz1"]);
    // Exact match plus inexact copies from the same (exactly renamed) source.
    let b = vec![(p("a1"), file(edit_tail(&l, 2))), (p("b1"), file(cat(&l)))];
    let out = r.case(&a, &b);
    assert_eq!(out, vec!["C090\ts\ta1", "R100\ts\tb1"]);
}

#[test]
fn identical_content_multiples() {
    let mut r = Repo::new();
    let c = cat(&lines("same ", 10));
    let a = vec![
        (p("x/f"), file(&c)),
        (p("y/f"), file(&c)),
        (p("z/g"), file(&c)),
    ];
    let b = vec![
        (p("v/h"), file(&c)),
        (p("w/f"), file(&c)),
        (p("w/g"), file(&c)),
    ];
    r.case(&a, &b);
    let b = vec![
        (p("v/h"), file(&c)),
        (p("w/f"), file(&c)),
        (p("w/g"), file(&c)),
        (p("w/i"), file(&c)),
    ];
    r.case(&a, &b);
    let a = vec![
        (p("keep"), file(&c)),
        (p("mod"), file(&c)),
        (p("x/f"), file(&c)),
    ];
    let b = vec![
        (p("keep"), file(&c)),
        (p("mod"), file("changed\n")),
        (p("n/f"), file(&c)),
        (p("o/f"), file(&c)),
    ];
    r.case(&a, &b);
}

#[test]
fn more_than_100_identical_sources() {
    let mut r = Repo::new();
    let a: Vec<(String, Obj)> = (0..120)
        .map(|i| (format!("d/f{i:03}"), file("same\n")))
        .collect();
    let b = vec![(p("e/f110"), file("same\n"))];
    let out = r.case(&a, &b);
    // git only looks at the first 100 identical candidates.
    assert!(out.contains(&p("R100\td/f000\te/f110")), "{out:?}");
}

#[test]
fn empty_files() {
    let mut r = Repo::new();
    let a = vec![
        (p("e1"), file("")),
        (p("e2"), file("")),
        (p("t"), file("text\n")),
    ];
    let b = vec![
        (p("n1"), file("")),
        (p("n2"), file("")),
        (p("n3"), file("")),
        (p("x/e1"), file("")),
        (p("t"), file("")),
    ];
    r.case(&a, &b);
    let a = vec![(p("t"), file("text\n"))];
    let b = vec![(p("t"), file("")), (p("u"), file(""))];
    assert_eq!(r.case(&a, &b), vec!["M\tt", "A\tu"]);
}

#[test]
fn binary_files() {
    let mut r = Repo::new();
    let bin: Vec<u8> = (0..400u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut edited = bin.clone();
    for b in edited.iter_mut().skip(300).take(40) {
        *b = b'\r';
    }
    let mut crlf = bin.clone();
    crlf.extend_from_slice(b"\r\n\r\n\r\n");
    let a = vec![
        (p("bin/a.bin"), file(&bin)),
        (p("bin/b.bin"), file(&bin[..200])),
    ];
    let b = vec![(p("c.bin"), file(&edited)), (p("d.bin"), file(&crlf))];
    r.case(&a, &b);
}

#[test]
fn crlf_text() {
    let mut r = Repo::new();
    let l1 = lines("crlf ", 30);
    let l2 = lines("text ", 30);
    let crlf = |l: &[String]| -> Vec<u8> {
        l.iter()
            .flat_map(|s| s.replace('\n', "\r\n").into_bytes())
            .collect()
    };
    let a = vec![
        (p("unix.txt"), file(cat(&l1))),
        (p("dos.txt"), file(crlf(&l2))),
    ];
    let b = vec![
        (p("unix2.txt"), file(crlf(&l1))),
        (p("dos2.txt"), file(cat(&l2))),
    ];
    let out = r.case(&a, &b);
    assert_eq!(
        out,
        vec!["R090\tdos.txt\tdos2.txt", "R090\tunix.txt\tunix2.txt"]
    );
}

#[test]
fn mode_changes() {
    let mut r = Repo::new();
    let l = lines("mode ", 20);
    let a = vec![
        (p("f"), file("f\n")),
        (p("g"), file(cat(&l))),
        (p("h"), Obj::Exec(cat(&l[..10]))),
    ];
    let b = vec![
        (p("f"), Obj::Exec(b"f\n".to_vec())),
        (p("g2"), Obj::Exec(cat(&l))),
        (p("h2"), file(edit_tail(&l[..10], 1))),
    ];
    assert_eq!(r.case(&a, &b), vec!["M\tf", "R100\tg\tg2", "R090\th\th2"]);
}

#[test]
fn symlinks() {
    let mut r = Repo::new();
    let long = b"some/rather/long/target/path/name".to_vec();
    let mut long2 = long.clone();
    long2.push(b'2');
    let a = vec![
        (p("f"), file("target")),
        (p("l1"), Obj::Link(b"target".to_vec())),
        (p("l2"), Obj::Link(long.clone())),
        (p("l3"), Obj::Link(long.clone())),
    ];
    let b = vec![
        (p("g"), file("target")),
        (p("l1moved"), Obj::Link(b"target".to_vec())),
        (p("l2moved"), Obj::Link(long2)),
        (p("n"), file(&long)),
        (p("o"), Obj::Link(b"target".to_vec())),
    ];
    r.case(&a, &b);
    // A symlink is never matched to a regular file with the same blob.
    let a = vec![(p("l"), Obj::Link(b"x".to_vec()))];
    let b = vec![(p("f"), file("x"))];
    assert_eq!(r.case(&a, &b), vec!["A\tf", "D\tl"]);
}

#[test]
fn submodules_and_type_changes() {
    let mut r = Repo::new();
    let id1 = "1111111111111111111111111111111111111111".to_string();
    let id2 = "2222222222222222222222222222222222222222".to_string();
    let l = lines("type ", 12);
    let a = vec![
        (p("sub"), Obj::Sub(id1.clone())),
        (p("sub2"), Obj::Sub(id1.clone())),
        (p("t"), file(cat(&l))),
    ];
    let b = vec![
        (p("moved/sub"), Obj::Sub(id1.clone())),
        (p("sub2"), Obj::Sub(id2.clone())),
        (p("t"), Obj::Link(b"elsewhere".to_vec())),
        (p("tcopy"), file(edit_tail(&l, 1))),
    ];
    r.case(&a, &b);
    // A directory replaced by a file.
    let a = vec![(p("a/x"), file(cat(&l)))];
    let b = vec![(p("a"), file(cat(&l)))];
    assert_eq!(r.case(&a, &b), vec!["R100\ta/x\ta"]);
}

#[test]
fn basename_breaks_ties() {
    let mut r = Repo::new();
    let l = lines("tie! ", 20);
    let a = vec![(p("a/y.txt"), file(cat(&l))), (p("b/x.txt"), file(cat(&l)))];
    let b = vec![(p("c/x.txt"), file(edit_tail(&l, 3)))];
    assert_eq!(r.case(&a, &b), vec!["D\ta/y.txt", "R085\tb/x.txt\tc/x.txt"]);
    let b = vec![(p("c/x.txt"), file(cat(&l)))];
    assert_eq!(r.case(&a, &b), vec!["D\ta/y.txt", "R100\tb/x.txt\tc/x.txt"]);
}

#[test]
fn candidate_matrix() {
    // Many sources compete for few destinations and the other way round.
    let mut r = Repo::new();
    let l = lines("mtrx ", 40);
    let a: Vec<(String, Obj)> = (0..7)
        .map(|k| (format!("s{k}"), file(edit_tail(&l, 2 * k))))
        .collect();
    let b: Vec<(String, Obj)> = (0..5)
        .map(|k| (format!("d{k}"), file(edit_tail(&l, 3 * k + 1))))
        .collect();
    r.case(&a, &b);
    let a: Vec<(String, Obj)> = (0..2)
        .map(|k| (format!("s{k}"), file(edit_tail(&l, 5 * k + 1))))
        .collect();
    let b: Vec<(String, Obj)> = (0..6)
        .map(|k| (format!("d{k}"), file(edit_tail(&l, k + 2))))
        .collect();
    r.case(&a, &b);
}

#[test]
fn rename_preferred_over_better_copy() {
    let mut r = Repo::new();
    let l = lines("pref ", 20);
    // d is 90% like modified f but only 80% like deleted g: the rename pass
    // (which skips used sources) runs first, so d is a rename of g.
    let a = vec![(p("f"), file(edit_tail(&l, 2))), (p("g"), file(cat(&l)))];
    let b = vec![(p("d"), file(edit_tail(&l, 4))), (p("f"), file("other\n"))];
    assert_eq!(r.case(&a, &b), vec!["R080\tg\td", "M\tf"]);
}

#[test]
fn long_lines_and_missing_newline() {
    let mut r = Repo::new();
    let long: String = (0..50).map(|i| format!("word{i} ")).collect();
    let mut text = format!("{long}\n{long}{long}\nshort\n");
    text.push_str("no newline at end");
    let mut edited = text.replace("word7 ", "WORD7 ");
    edited.push_str(" more");
    let a = vec![(p("long.txt"), file(&text))];
    let b = vec![(p("long2.txt"), file(&edited))];
    r.case(&a, &b);
}

#[test]
fn rename_limit_matches_git() {
    let mut r = Repo::new();
    let l = lines("limt ", 20);
    let a = vec![
        (p("e"), file("exact\n")),
        (p("s1"), file(cat(&l))),
        (p("s2"), file(edit_tail(&l, 19))),
    ];
    let b = vec![
        (p("d1"), file(edit_tail(&l, 1))),
        (p("d2"), file(edit_tail(&l, 2))),
        (p("d3"), file(edit_tail(&l, 3))),
        (p("f"), file("exact\n")),
    ];
    let (ra, rb) = r.two_trees(&a, &b);
    // 3 remaining destinations * 3 sources = 9 > 2 * 2: inexact detection is skipped.
    let want = r.git_diff(&ra, &rb, &["-l", "2"]);
    let limits = Limits {
        rename_limit: 2,
        ..Limits::default()
    };
    let (got, cut) = r.our_diff(&ra, &rb, limits);
    assert_eq!(got, want);
    assert_eq!(cut, super::Cut::RenameLimit);
    assert!(
        want.contains(&p("R100\te\tf")) && want.contains(&p("A\td1")),
        "{want:?}"
    );
    // 3 * 3 = 9 <= 3 * 3: it runs.
    let want = r.git_diff(&ra, &rb, &["-l", "3"]);
    let (got, cut) = r.our_diff(
        &ra,
        &rb,
        Limits {
            rename_limit: 3,
            ..Limits::default()
        },
    );
    assert_eq!(got, want);
    assert_eq!(cut, super::Cut::None);
    assert!(want.contains(&p("C095\ts1\td1")), "{want:?}");
}

/// The shape of radicle-explorer's copy-and-move commit (its e2e test shows `copies/aaa.txt`
/// modified, copied to `copies/aaa_copy.txt` at 50 %, `moves/111.txt` moved to
/// `moves/222.txt` at 50 %), with our own contents.
#[test]
fn explorer_copy_and_move_shape() {
    let mut r = Repo::new();
    let aaa = lines("aaa ", 8);
    let one = lines("one ", 8);
    let a = vec![
        (p("copies/aaa.txt"), file(cat(&aaa))),
        (p("moves/111.txt"), file(cat(&one))),
    ];
    let b = vec![
        (p("copies/aaa.txt"), file(edit_tail(&aaa, 1))),
        (p("copies/aaa_copy.txt"), file(edit_tail(&aaa, 3))),
        (p("moves/222.txt"), file(edit_tail(&one, 3))),
    ];
    // `case` checks our answer against git's, scores included.
    let out = r.case(&a, &b);
    let shape: Vec<String> = out
        .iter()
        .map(|l| {
            let mut f = l.split('\t');
            let status = f.next().unwrap_or_default();
            let paths: Vec<&str> = f.collect();
            format!("{} {}", &status[..1], paths.join(" "))
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            "M copies/aaa.txt",
            "C copies/aaa.txt copies/aaa_copy.txt",
            "R moves/111.txt moves/222.txt"
        ],
        "{out:?}"
    );
}

/// radicle-explorer's own e2e fixture (`tests/fixtures/repos/source-browsing.tar.bz2` of an
/// explorer checkout named by `EXPLORER_DIR`, a gzip tarball of a bare repository): its
/// copy-and-move commit as the explorer's e2e test expects, and every commit against every
/// other. Without `EXPLORER_DIR` this says so and checks nothing (CI has no explorer
/// checkout; `scripts/explorer/browser.sh` runs it with one).
#[test]
fn explorer_fixture() {
    let Some(dir) = std::env::var_os("EXPLORER_DIR") else {
        eprintln!("EXPLORER_DIR is not set: the explorer's fixture is not checked");
        return;
    };
    let tarball = Path::new(&dir).join("tests/fixtures/repos/source-browsing.tar.bz2");
    let r = Repo::from_tarball(&tarball);
    let out = r.git(&["rev-list", "--all"]);
    let commits: Vec<String> = String::from_utf8(out)
        .expect("utf8")
        .lines()
        .map(str::to_string)
        .collect();
    assert!(commits.len() >= 10, "{commits:?}");
    let copy_move = "f48a1056a5bd02277978f6e8a00517a967546340";
    let out = r.check(&format!("{copy_move}^"), copy_move);
    // What the explorer's e2e tests (tests/e2e/repo/commit.spec.ts) show.
    assert_eq!(
        out,
        vec![
            "M\tcopies/aaa.txt",
            "C050\tcopies/aaa.txt\tcopies/aaa_copy.txt",
            "R050\tmoves/111.txt\tmoves/222.txt"
        ]
    );
    for a in &commits {
        for b in &commits {
            if a != b {
                r.check(a, b);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Randomized differential test.

const DIRS: [&str; 5] = ["", "a/", "b/", "a/c/", "d/"];
const NAMES: [&str; 5] = ["x", "y.txt", "z.rs", "w", "v.md"];

fn random_text(rng: &mut Rng) -> Vec<u8> {
    let n = 1 + rng.below(24) as usize;
    let crlf = rng.chance(1, 8);
    let mut out = String::new();
    for _ in 0..n {
        let line = if rng.chance(1, 10) {
            let w = format!("w{} ", rng.below(5));
            w.repeat(10 + rng.below(20) as usize)
        } else {
            format!("line {}", rng.below(40))
        };
        out.push_str(&line);
        out.push_str(if crlf { "\r\n" } else { "\n" });
    }
    if rng.chance(1, 6) {
        out.pop();
    }
    out.into_bytes()
}

fn random_binary(rng: &mut Rng) -> Vec<u8> {
    let n = 10 + rng.below(300) as usize;
    let mut v: Vec<u8> = (0..n).map(|_| *rng.pick(b"\0\r\nab\xffc")).collect();
    v[rng.below(n as u64) as usize] = 0;
    v
}

fn random_content(rng: &mut Rng) -> Vec<u8> {
    match rng.below(20) {
        0 => Vec::new(),
        1 | 2 => random_binary(rng),
        _ => random_text(rng),
    }
}

/// Edits roughly `pct`% of the content (by lines, or bytes for binaries).
fn edit(rng: &mut Rng, data: &[u8], pct: u64) -> Vec<u8> {
    if data.contains(&0) {
        let mut v = data.to_vec();
        for b in &mut v {
            if rng.below(100) < pct {
                *b = *rng.pick(b"\0xyz\n\r");
            }
        }
        if rng.chance(1, 3) {
            v.extend_from_slice(b"tail\n");
        }
        return v;
    }
    let mut out = Vec::new();
    for line in data.split_inclusive(|&b| b == b'\n') {
        if rng.below(100) < pct {
            match rng.below(3) {
                0 => {}
                1 => {
                    out.extend_from_slice(format!("new {}\n", rng.below(40)).as_bytes());
                    out.extend_from_slice(line);
                }
                _ => out.extend_from_slice(format!("changed {}\n", rng.below(40)).as_bytes()),
            }
        } else {
            out.extend_from_slice(line);
        }
    }
    if out.is_empty() || rng.chance(1, 5) {
        out.extend_from_slice(b"added line\n");
    }
    out
}

fn random_obj(rng: &mut Rng, existing: &BTreeMap<String, Obj>) -> Obj {
    if !existing.is_empty() && rng.chance(1, 8) {
        let objs: Vec<&Obj> = existing.values().collect();
        return (*rng.pick(&objs)).clone();
    }
    match rng.below(25) {
        0 | 1 => Obj::Exec(random_content(rng)),
        2 | 3 => Obj::Link(format!("target{}", rng.below(4)).into_bytes()),
        4 => Obj::Sub(format!("{:040x}", rng.below(3) + 1)),
        _ => Obj::File(random_content(rng)),
    }
}

fn edit_obj(rng: &mut Rng, obj: &Obj, pct: u64) -> Obj {
    match obj {
        Obj::File(d) => Obj::File(edit(rng, d, pct)),
        Obj::Exec(d) => Obj::Exec(edit(rng, d, pct)),
        Obj::Link(d) if pct > 0 => {
            let mut d = d.clone();
            d.push(b'x');
            Obj::Link(d)
        }
        other => other.clone(),
    }
}

fn free_path(rng: &mut Rng, tree: &BTreeMap<String, Obj>) -> Option<String> {
    for _ in 0..20 {
        let path = format!("{}{}", rng.pick(&DIRS), rng.pick(&NAMES));
        if !tree.contains_key(&path) {
            return Some(path);
        }
    }
    None
}

fn random_case(rng: &mut Rng) -> (BTreeMap<String, Obj>, BTreeMap<String, Obj>) {
    let mut old = BTreeMap::new();
    for _ in 0..2 + rng.below(9) {
        if let Some(path) = free_path(rng, &old) {
            let obj = random_obj(rng, &old);
            old.insert(path, obj);
        }
    }
    let mut new = old.clone();
    for _ in 0..1 + rng.below(6) {
        let paths: Vec<String> = new.keys().cloned().collect();
        let pct = *rng.pick(&[0, 0, 10, 20, 30, 40, 45, 50, 55, 60, 80]);
        let Some(path) = (if paths.is_empty() {
            None
        } else {
            Some(rng.pick(&paths).clone())
        }) else {
            if let Some(to) = free_path(rng, &new) {
                let obj = random_obj(rng, &new);
                new.insert(to, obj);
            }
            continue;
        };
        match rng.below(9) {
            0 => {
                new.remove(&path);
            }
            1 => {
                let obj = edit_obj(rng, &new[&path], pct.max(10));
                new.insert(path, obj);
            }
            2 | 3 => {
                if let Some(to) = free_path(rng, &new) {
                    let obj = new.remove(&path).map(|o| edit_obj(rng, &o, pct));
                    if let Some(obj) = obj {
                        new.insert(to, obj);
                    }
                }
            }
            4 | 5 => {
                if let Some(to) = free_path(rng, &new) {
                    let obj = edit_obj(rng, &new[&path], pct);
                    new.insert(to, obj);
                }
            }
            6 => {
                if let Some(to) = free_path(rng, &new) {
                    let obj = random_obj(rng, &new);
                    new.insert(to, obj);
                }
            }
            7 => {
                let obj = match &new[&path] {
                    Obj::File(d) => Obj::Exec(d.clone()),
                    Obj::Exec(d) => Obj::File(d.clone()),
                    other => other.clone(),
                };
                new.insert(path, obj);
            }
            _ => {
                let obj = match &new[&path] {
                    Obj::File(d) | Obj::Exec(d) if d.len() < 100 => Obj::Link(d.clone()),
                    Obj::Link(d) => Obj::File(d.clone()),
                    other => edit_obj(rng, other, 30),
                };
                new.insert(path, obj);
            }
        }
    }
    (old, new)
}

/// Many sources and destinations derived from one text, so that they all
/// compete for each other (candidate slots, sort order, ties).
#[test]
fn randomized_families_against_git() {
    const CASES: usize = 60;
    let mut rng = Rng(0x0FA1_11E5);
    let r = Repo::new();
    let mut stream = Vec::new();
    for i in 0..CASES {
        let base: Vec<u8> = (0..10 + rng.below(20))
            .flat_map(|k| format!("family line {k}\n").into_bytes())
            .collect();
        let mut old = BTreeMap::new();
        let mut new = BTreeMap::new();
        for k in 0..2 + rng.below(7) {
            let path = format!("{}s{k}", rng.pick(&DIRS));
            let pct = rng.below(40);
            old.insert(path.clone(), Obj::File(edit(&mut rng, &base, pct)));
            if rng.chance(1, 4) {
                let pct = rng.below(40);
                new.insert(path, Obj::File(edit(&mut rng, &base, pct)));
            }
        }
        for k in 0..2 + rng.below(7) {
            let path = format!(
                "{}{}",
                rng.pick(&DIRS),
                if rng.chance(1, 3) {
                    format!("s{k}")
                } else {
                    format!("d{k}")
                }
            );
            if !old.contains_key(&path) {
                let pct = *rng.pick(&[0, 5, 10, 20, 30, 40]);
                new.insert(path, Obj::File(edit(&mut rng, &base, pct)));
            }
        }
        let v = |t: &BTreeMap<String, Obj>| {
            t.iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>()
        };
        Repo::commit_to(&mut stream, &format!("refs/heads/f{i}a"), &v(&old));
        Repo::commit_to(&mut stream, &format!("refs/heads/f{i}b"), &v(&new));
    }
    r.import(&stream);
    let mut copies = 0;
    for i in 0..CASES {
        let (a, b) = (format!("f{i}a"), format!("f{i}b"));
        let want = r.git_diff(&a, &b, &[]);
        let (got, cut) = r.our_diff(&a, &b, Limits::default());
        assert_eq!(cut, super::Cut::None);
        assert_eq!(got, want, "family case {i}: ours (left) vs git (right)");
        copies += want.iter().filter(|l| l.starts_with('C')).count();
    }
    assert!(copies >= 20, "too few copies: {copies}");
}

#[test]
fn randomized_against_git() {
    const CASES: usize = 200;
    let mut rng = Rng(0x5EED_D00D);
    let r = Repo::new();
    let mut stream = Vec::new();
    let mut cases = Vec::new();
    for i in 0..CASES {
        let (old, new) = random_case(&mut rng);
        let v = |t: &BTreeMap<String, Obj>| {
            t.iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>()
        };
        Repo::commit_to(&mut stream, &format!("refs/heads/r{i}a"), &v(&old));
        Repo::commit_to(&mut stream, &format!("refs/heads/r{i}b"), &v(&new));
        cases.push((old, new));
    }
    r.import(&stream);
    let mut stats: BTreeMap<String, usize> = BTreeMap::new();
    for (i, (old, new)) in cases.iter().enumerate() {
        let (a, b) = (format!("r{i}a"), format!("r{i}b"));
        let want = r.git_diff(&a, &b, &[]);
        let (got, cut) = r.our_diff(&a, &b, Limits::default());
        assert_eq!(cut, super::Cut::None);
        assert_eq!(
            got, want,
            "case {i}: ours (left) vs git (right)\nold: {old:?}\nnew: {new:?}"
        );
        for line in &want {
            let status = &line[..1];
            let key = match (status, &line[1..line.find('\t').unwrap_or(1)]) {
                ("R" | "C", "100") => format!("{status}100"),
                ("R" | "C", _) => format!("{status}<100"),
                _ => status.to_string(),
            };
            *stats.entry(key).or_default() += 1;
        }
    }
    eprintln!("statuses over {CASES} random cases: {stats:?}");
    // The corpus must exercise every outcome.
    for key in ["R100", "R<100", "C100", "C<100", "A", "D", "M", "T"] {
        assert!(
            stats.get(key).copied().unwrap_or(0) >= 5,
            "too few {key}: {stats:?}"
        );
    }
}
