//! Bounds: byte and work budgets, cancellation, rename limit, loader errors.

use std::cell::Cell;
use std::collections::HashMap;
use std::time::Instant;

use super::{detect, Cut, Dest, Found, Kind, Limits, Mode, Source, MAX_SCORE};

fn text(tag: &str, n: usize, edited: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            if i < n - edited {
                format!("{tag} {i:03}\n")
            } else {
                format!("EDIT {i:03}\n")
            }
        })
        .collect::<String>()
        .into_bytes()
}

struct Fixture {
    sources: Vec<Source<u32>>,
    dests: Vec<Dest<u32>>,
    blobs: HashMap<u32, Vec<u8>>,
}

fn src(path: &str, id: u32, blobs: &HashMap<u32, Vec<u8>>, deleted: bool) -> Source<u32> {
    Source {
        path: path.into(),
        id,
        mode: Mode::File,
        size: blobs[&id].len() as u64,
        deleted,
    }
}

fn dst(path: &str, id: u32, blobs: &HashMap<u32, Vec<u8>>) -> Dest<u32> {
    Dest {
        path: path.into(),
        id,
        mode: Mode::File,
        size: blobs[&id].len() as u64,
    }
}

/// Inputs deliberately not in path order.
fn fixture() -> Fixture {
    let mut blobs = HashMap::new();
    blobs.insert(1, text("exac", 5, 0));
    blobs.insert(2, text("line", 20, 0));
    blobs.insert(3, text("modi", 20, 0));
    blobs.insert(4, text("line", 20, 2));
    blobs.insert(5, text("modi", 20, 5));
    let sources = vec![
        src("z-old", 2, &blobs, true),
        src("m-mod", 3, &blobs, false),
        src("a-exact", 1, &blobs, true),
    ];
    let dests = vec![
        dst("y-new", 4, &blobs),
        dst("b-moved", 1, &blobs),
        dst("c-copy", 5, &blobs),
    ];
    Fixture {
        sources,
        dests,
        blobs,
    }
}

fn run(fx: &Fixture, limits: Limits, cancel: bool) -> (Vec<Found>, Cut, usize) {
    let loads = Cell::new(0usize);
    let mut load = |id: &u32| {
        loads.set(loads.get() + 1);
        Ok::<_, String>(fx.blobs[id].clone())
    };
    let (found, cut) =
        detect(&fx.sources, &fx.dests, &mut load, limits, &|| cancel).expect("no loader error");
    (found, cut, loads.get())
}

fn unlimited() -> Limits {
    Limits {
        max_bytes: u64::MAX,
        max_work: u64::MAX,
        rename_limit: 0,
    }
}

fn exact_only() -> Vec<Found> {
    vec![Found {
        dest: 1,
        source: 2,
        kind: Kind::Rename,
        score: MAX_SCORE,
    }]
}

#[test]
fn full_detection() {
    let fx = fixture();
    let (found, cut, loads) = run(&fx, unlimited(), false);
    assert_eq!(cut, Cut::None);
    assert_eq!(
        found,
        vec![
            Found {
                dest: 1,
                source: 2,
                kind: Kind::Rename,
                score: MAX_SCORE
            },
            Found {
                dest: 2,
                source: 1,
                kind: Kind::Copy,
                score: 45000
            },
            Found {
                dest: 0,
                source: 0,
                kind: Kind::Rename,
                score: 54000
            },
        ]
    );
    assert_eq!(found[1].similarity(), 75);
    // Blobs 2, 3, 4, 5 (1 is matched exactly and sizes rule it out elsewhere).
    assert!(loads <= 5, "{loads}");
}

#[test]
fn byte_budget() {
    let fx = fixture();
    let (found, cut, loads) = run(
        &fx,
        Limits {
            max_bytes: 0,
            ..unlimited()
        },
        false,
    );
    assert_eq!((found, cut, loads), (exact_only(), Cut::Bytes, 0));
    // Find the exact budget needed; one byte less is cut before any read.
    let mut need = 0;
    while run(
        &fx,
        Limits {
            max_bytes: need,
            ..unlimited()
        },
        false,
    )
    .1 == Cut::Bytes
    {
        need += 1;
    }
    let (_, cut, loads) = run(
        &fx,
        Limits {
            max_bytes: need - 1,
            ..unlimited()
        },
        false,
    );
    assert_eq!((cut, loads), (Cut::Bytes, 0));
    let (found, cut, _) = run(
        &fx,
        Limits {
            max_bytes: need,
            ..unlimited()
        },
        false,
    );
    assert_eq!((found.len(), cut), (3, Cut::None));
    // Distinct blobs 2..=5 are the ones inexact detection reads.
    let expected: u64 = (2..=5).map(|id| fx.blobs[&id].len() as u64).sum();
    assert_eq!(need, expected);
}

#[test]
fn work_budget() {
    let fx = fixture();
    // 2 remaining destinations * 3 sources = 6 pairs; fewer steps than pairs
    // cuts before reading anything.
    let (found, cut, loads) = run(
        &fx,
        Limits {
            max_work: 5,
            ..unlimited()
        },
        false,
    );
    assert_eq!((found, cut, loads), (exact_only(), Cut::Work, 0));
    // Enough for the pairs but not for the span tables: cut after hashing.
    let (found, cut, loads) = run(
        &fx,
        Limits {
            max_work: 6,
            ..unlimited()
        },
        false,
    );
    assert_eq!((found, cut), (exact_only(), Cut::Work));
    assert!(loads > 0);
    let mut need = 6;
    while run(
        &fx,
        Limits {
            max_work: need,
            ..unlimited()
        },
        false,
    )
    .1 == Cut::Work
    {
        need += 1;
    }
    // Four compared pairs of 20-line files (20 spans each, minus duplicates).
    assert!(need > 6 + 4 * 30 && need <= 6 + 4 * 40, "{need}");
    assert_eq!(
        run(
            &fx,
            Limits {
                max_work: need,
                ..unlimited()
            },
            false
        )
        .0
        .len(),
        3
    );
}

#[test]
fn cancellation_keeps_exact() {
    let fx = fixture();
    let (found, cut, loads) = run(&fx, unlimited(), true);
    assert_eq!((found, cut, loads), (exact_only(), Cut::Cancelled, 0));
}

#[test]
fn rename_limit() {
    let fx = fixture();
    // 2 * 3 = 6 > 2 * 2.
    let (found, cut, loads) = run(
        &fx,
        Limits {
            rename_limit: 2,
            ..unlimited()
        },
        false,
    );
    assert_eq!((found, cut, loads), (exact_only(), Cut::RenameLimit, 0));
    let (found, cut, _) = run(
        &fx,
        Limits {
            rename_limit: 3,
            ..unlimited()
        },
        false,
    );
    assert_eq!((found.len(), cut), (3, Cut::None));
}

#[test]
fn loader_errors_propagate() {
    let fx = fixture();
    let mut load = |_: &u32| Err::<Vec<u8>, _>("boom");
    let r = detect(&fx.sources, &fx.dests, &mut load, unlimited(), &|| false);
    assert_eq!(r.err(), Some("boom"));
}

#[test]
fn wrong_size_is_incomparable() {
    let mut fx = fixture();
    fx.dests[0].size += 1; // y-new
    let (found, cut, _) = run(&fx, unlimited(), false);
    assert_eq!(cut, Cut::None);
    assert!(found.iter().all(|f| f.dest != 0), "{found:?}");
}

#[test]
fn blobs_are_read_once() {
    let mut fx = fixture();
    fx.blobs.insert(6, text("line", 20, 3));
    let extra: Vec<Dest<u32>> = (0..5)
        .map(|i| dst(&format!("dup{i}"), 6, &fx.blobs))
        .collect();
    fx.dests.extend(extra);
    let (found, cut, loads) = run(&fx, unlimited(), false);
    assert_eq!(cut, Cut::None);
    assert_eq!(loads, 5);
    assert_eq!(found.len(), 8);
}

#[test]
fn hostile_sizes_stay_bounded() {
    // 3000 identical deleted files and 3000 added copies, plus 3000 distinct
    // additions against 3000 distinct deletions, without a rename limit.
    let n = 3000u32;
    let mut sources = Vec::new();
    let mut dests = Vec::new();
    for i in 0..n {
        sources.push(Source {
            path: format!("old/same{i}"),
            id: 0,
            mode: Mode::File,
            size: 100,
            deleted: true,
        });
        sources.push(Source {
            path: format!("old/x{i}"),
            id: 10_000 + i,
            mode: Mode::File,
            size: 100,
            deleted: true,
        });
        dests.push(Dest {
            path: format!("new/same{i}"),
            id: 0,
            mode: Mode::File,
            size: 100,
        });
        dests.push(Dest {
            path: format!("new/y{i}"),
            id: 20_000 + i,
            mode: Mode::File,
            size: 100,
        });
    }
    let loads = Cell::new(0);
    let mut load = |_: &u32| {
        loads.set(loads.get() + 1);
        Ok::<_, ()>(vec![b'x'; 100])
    };
    let limits = Limits {
        max_bytes: 1 << 20,
        max_work: 1_000_000,
        rename_limit: 0,
    };
    let start = Instant::now();
    let (found, cut) = detect(&sources, &dests, &mut load, limits, &|| false).expect("ok");
    assert_eq!(cut, Cut::Work);
    assert_eq!(loads.get(), 0);
    assert_eq!(found.len(), n as usize);
    assert!(found
        .iter()
        .all(|f| f.score == MAX_SCORE && sources[f.source].id == 0));
    assert!(start.elapsed().as_secs() < 20);
    // With room for pairs but not bytes, nothing is read either.
    let limits = Limits {
        max_bytes: 100_000,
        max_work: u64::MAX,
        rename_limit: 0,
    };
    let (_, cut) = detect(&sources, &dests, &mut load, limits, &|| false).expect("ok");
    assert_eq!(cut, Cut::Bytes);
    assert_eq!(loads.get(), 0);
}
