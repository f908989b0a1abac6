//! grep and find on a tree big enough that the parallel walk takes over (thousands of files in
//! nested directories): output order and limits against a reference computed here, by a plain
//! recursive walk that applies the tree's (known) ignore rules and sorts paths component by
//! component, byte-wise.

use crate::tools_common::*;
use serde_json::json;
use std::fs;
use std::path::Path;

/// Top-level directories, named to make byte-wise order matter (`.`, `-`, `_`, digits,
/// upper case, a directory name that is a prefix of a sibling file's name).
const TOPS: [&str; 10] = ["a", "a.b", "a-b", "a_b", "B", "b", "b0", "10", "9", "Z"];

/// A small deterministic generator (no dependency needed for a fixed tree).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// The tree: a git repository whose `.gitignore` ignores `ignored/` and `*.log`, an `.ignore`
/// in `a/d1` ignoring `skip_me*` below it, 10 × 6 × 5 directories of 10 files each (half
/// `.rs`), a quarter of the files holding 1–3 `needle` lines, a directory named `weird.rs`,
/// hidden files.
fn make_tree(root: &Path) {
    let mut rnd = Lcg(15);
    fs::create_dir(root.join(".git")).unwrap();
    fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(root.join(".gitignore"), "ignored/\n*.log\n").unwrap();
    let mut n = 0u64;
    let mut write_file = |dir: &Path, name: &str, rnd: &mut Lcg| {
        n += 1;
        let lines = 3 + rnd.next(20);
        let needles = if rnd.next(4) == 0 { 1 + rnd.next(3) } else { 0 };
        let mut at: Vec<u64> = (0..needles).map(|_| rnd.next(lines)).collect();
        at.sort_unstable();
        let mut text = String::new();
        for l in 0..lines {
            if at.contains(&l) {
                text.push_str(&format!("needle {n}\n"));
            } else {
                text.push_str(&format!("hay {n} {l}\n"));
            }
        }
        fs::write(dir.join(name), text).unwrap();
    };
    for top in TOPS {
        for d in 0..6 {
            for e in 0..5 {
                let dir = root.join(top).join(format!("d{d}")).join(format!("e{e}"));
                fs::create_dir_all(&dir).unwrap();
                for f in [0, 1, 2, 9, 10, 11, 19, 20, 100, 3] {
                    let ext = if f % 2 == 0 { "rs" } else { "txt" };
                    write_file(&dir, &format!("f{f}.{ext}"), &mut rnd);
                }
            }
            let dir = root.join(top).join(format!("d{d}"));
            write_file(&dir, "x.log", &mut rnd);
            write_file(&dir, ".hidden.rs", &mut rnd);
        }
        write_file(root, &format!("{top}.rs"), &mut rnd);
    }
    for i in 0..40 {
        let dir = root.join("ignored").join(format!("i{}", i % 4));
        fs::create_dir_all(&dir).unwrap();
        write_file(&dir, &format!("g{i}.rs"), &mut rnd);
    }
    fs::write(root.join("a/d1/.ignore"), "skip_me*\n").unwrap();
    write_file(&root.join("a/d1"), "skip_me.rs", &mut rnd);
    write_file(&root.join("a/d1/e3"), "skip_me_too.rs", &mut rnd);
    write_file(&root.join("b/d1"), "skip_me.rs", &mut rnd);
    fs::create_dir_all(root.join("b0/weird.rs")).unwrap();
    write_file(&root.join("b0/weird.rs"), "inner.rs", &mut rnd);
}

/// Every entry the tools should see, as (relative path, is a directory), sorted component by
/// component, byte-wise. `rs_glob`: grep's `glob` `*.rs` is in force, which (an override, as in
/// ripgrep) brings back `.rs` files that an ignore file excludes (not those in an ignored
/// directory, which is not entered).
fn reference_entries(root: &Path, rs_glob: bool) -> Vec<(String, bool)> {
    fn walk(root: &Path, rel: &str, rs_glob: bool, out: &mut Vec<(String, bool)>) {
        for entry in fs::read_dir(root.join(rel)).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let is_dir = entry.file_type().unwrap().is_dir();
            let ignored = name == ".git"
                || (rel.is_empty() && name == "ignored")
                || (!is_dir && name.ends_with(".log"))
                || (path.starts_with("a/d1/")
                    && name.starts_with("skip_me")
                    && !(rs_glob && name.ends_with(".rs")));
            if ignored {
                continue;
            }
            out.push((path.clone(), is_dir));
            if is_dir {
                walk(root, &path, rs_glob, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, "", rs_glob, &mut out);
    out.sort_by(|a, b| key(&a.0).cmp(&key(&b.0)));
    out
}

fn key(rel: &str) -> Vec<&[u8]> {
    rel.split('/').map(str::as_bytes).collect()
}

/// `rel:line: text` for every line containing `needle` in the reference's files whose name
/// matches `only_rs`, in sorted walk order.
fn reference_grep(root: &Path, only_rs: bool) -> Vec<String> {
    let mut rows = Vec::new();
    for (rel, is_dir) in reference_entries(root, only_rs) {
        if is_dir || (only_rs && !rel.ends_with(".rs")) {
            continue;
        }
        let text = fs::read_to_string(root.join(&rel)).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.contains("needle") {
                rows.push(format!("{rel}:{}: {line}", i + 1));
            }
        }
    }
    rows
}

/// The rows of a listing (before its `[…]` notices) and the notice text.
fn split(out: &str) -> (Vec<String>, Option<String>) {
    match out.rsplit_once("\n\n[") {
        Some((rows, notice)) => (
            rows.split('\n').map(str::to_string).collect(),
            Some(notice.trim_end_matches(']').to_string()),
        ),
        None => (out.split('\n').map(str::to_string).collect(), None),
    }
}

/// Checks a listing against the first `limit` reference rows: the same rows in the same order,
/// the row-limit notice exactly when the reference has `limit` rows or more, never cut by the
/// byte limit (the tree keeps every listing under 50 KB).
fn check(out: &str, reference: &[String], limit: usize, noun: &str, what: &str) {
    let (rows, notice) = split(out);
    let want = &reference[..limit.min(reference.len())];
    if rows.len() != want.len() {
        let extra: Vec<&String> = rows.iter().filter(|r| !want.contains(r)).collect();
        let missing: Vec<&String> = want.iter().filter(|r| !rows.contains(r)).collect();
        panic!(
            "{what}: {} rows for {}; extra {extra:?}; missing {missing:?}",
            rows.len(),
            want.len()
        );
    }
    for (i, (got, exp)) in rows.iter().zip(want).enumerate() {
        assert_eq!(got, exp, "{what}: row {i}");
    }
    if reference.len() >= limit {
        let notice = notice.unwrap_or_else(|| panic!("{what}: no limit notice"));
        assert!(
            notice.starts_with(&format!("{limit} {noun} limit reached. Use limit=")),
            "{what}: {notice}"
        );
    } else {
        assert_eq!(notice, None, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_parallel_order_and_limits_match_sorted_reference() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    make_tree(root);
    let all = reference_grep(root, false);
    let rs = reference_grep(root, true);
    // Enough for the parallel walk (256 files searched sequentially) and the limits below.
    assert!(
        all.len() > 1000 && rs.len() > 500,
        "{} {}",
        all.len(),
        rs.len()
    );
    let t = tool(root, "grep");
    for round in 0..3 {
        for limit in [1usize, 3, 100, 400, 777, 1000, 1_000_000] {
            let out = run(&*t, json!({"pattern":"needle","limit":limit}))
                .await
                .unwrap();
            check(
                &text(&out),
                &all,
                limit,
                "matches",
                &format!("grep {limit} #{round}"),
            );
        }
        let out = run(
            &*t,
            json!({"pattern":"needle","glob":"*.rs","limit":100000}),
        )
        .await
        .unwrap();
        check(&text(&out), &rs, 100000, "matches", "grep glob");
        // A limit that is reached inside a file far into the tree.
        let limit = all.len() - 1;
        let out = run(&*t, json!({"pattern":"needle","limit":limit}))
            .await
            .unwrap();
        check(&text(&out), &all, limit, "matches", "grep all but one");
    }
    // A sub-directory as the search path: rows relative to it.
    let sub: Vec<String> = all
        .iter()
        .filter_map(|r| r.strip_prefix("b/").map(str::to_string))
        .collect();
    let out = run(&*t, json!({"pattern":"needle","path":"b","limit":100000}))
        .await
        .unwrap();
    check(&text(&out), &sub, 100000, "matches", "grep in b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_parallel_order_and_limits_match_sorted_reference() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    make_tree(root);
    let entries = reference_entries(root, false);
    let shown = |(rel, is_dir): &(String, bool)| {
        if *is_dir {
            format!("{rel}/")
        } else {
            rel.clone()
        }
    };
    let rs: Vec<String> = entries
        .iter()
        .filter(|(rel, _)| rel.rsplit('/').next().is_some_and(|n| n.ends_with(".rs")))
        .map(shown)
        .collect();
    let e_dirs: Vec<String> = entries
        .iter()
        .filter(|(rel, _)| rel.rsplit('/').next().is_some_and(|n| n.starts_with('e')))
        .map(shown)
        .collect();
    // More entries than the sequential walk's 2048.
    assert!(entries.len() > 3000 && rs.len() > 1500, "{}", entries.len());
    assert!(rs.contains(&"b0/weird.rs/".to_string()));
    let t = tool(root, "find");
    for round in 0..3 {
        for limit in [1usize, 2, 100, 1000, 1499, 10_000_000] {
            let out = run(&*t, json!({"pattern":"*.rs","limit":limit}))
                .await
                .unwrap();
            check(
                &text(&out),
                &rs,
                limit,
                "results",
                &format!("find {limit} #{round}"),
            );
        }
        let out = run(&*t, json!({"pattern":"e*","limit":100000}))
            .await
            .unwrap();
        check(&text(&out), &e_dirs, 100000, "results", "find e*");
        let limit = rs.len() - 1;
        let out = run(&*t, json!({"pattern":"*.rs","limit":limit}))
            .await
            .unwrap();
        check(&text(&out), &rs, limit, "results", "find all but one");
    }
    // The default limit (1000).
    let out = run(&*t, json!({"pattern":"*.rs"})).await.unwrap();
    check(&text(&out), &rs, 1000, "results", "find default limit");
}
