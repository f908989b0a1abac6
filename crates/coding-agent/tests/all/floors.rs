//! The crate's floors (issue 23): every top-level module of `src/` sits on one floor, and no
//! module imports one on a higher floor, so the crate reads bottom-up and a floor can be split
//! into its own crate. This test reads the sources (`crate::<module>` paths outside comments
//! and `#[cfg(test)]` code) and fails on an upward import, on a module no floor names, and on
//! a listed exception that no longer occurs (so the list only shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Bottom to top. A module may import its own floor and those below.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "platform",
        &[
            "tasks",
            "procs",
            "child_guard",
            "json_error",
            "images",
            "mem",
            "cli",
        ],
    ),
    ("stores", &["config", "tools"]),
    ("flows", &["auth", "session", "trust", "permissions"]),
    ("wire and capabilities", &["protocol", "mcp", "export"]),
    ("resources", &["resources", "codemode"]),
    ("packages", &["packages"]),
    ("system prompt", &["system_prompt"]),
    ("extensions", &["extensions"]),
    ("session runtime", &["agent_session"]),
    ("modes", &["output", "print_mode", "rpc", "acp"]),
    (
        "commands and main",
        &[
            "auth_cmd",
            "package_cmd",
            "models_cmd",
            "list_models",
            "file_args",
            "main",
            "startup",
            "lib",
        ],
    ),
];

/// Upward imports not cut yet: (file under `src/`, imported module). Each is a known debt.
/// (None now: the extensions reach the session runtime only through their `HostApi` trait,
/// which `agent_session/host_calls.rs` implements.)
const NOT_YET: &[(&str, &str)] = &[];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|(_, mods)| mods.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `(module, line)` for each `crate::<module>` path in `text` outside comments and tests.
fn crate_paths(text: &str) -> Vec<(String, usize)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut found = vec![];
    for (n, line) in code.lines().enumerate() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let before = rest[..i].chars().last();
            rest = &rest[i + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // e.g. `pi_coding_agent::…`, not this crate's path syntax
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push((name, n + 1));
            }
        }
    }
    found
}

/// One `crate::<target>` path in the sources: the file under `src/`, its top-level module,
/// the module it names, and the line.
struct Import {
    rel: String,
    top: String,
    target: String,
    line: usize,
}

/// Every cross-module import of `src/` (outside comments and tests), and the top-level
/// modules no floor names.
fn imports() -> (Vec<Import>, BTreeSet<String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    files.sort();
    let mut unplaced = BTreeSet::new();
    let mut found = vec![];
    for file in &files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if floor_of(&top).is_none() {
            unplaced.insert(top);
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (target, line) in crate_paths(&text) {
            // A crate-root item (`crate::Foo`) or a macro path names no floor.
            if target != top && floor_of(&target).is_some() {
                found.push(Import {
                    rel: rel.clone(),
                    top: top.clone(),
                    target,
                    line,
                });
            }
        }
    }
    // A module split out into its own crate is a re-export in `lib.rs`: it sits on its floor.
    for (module, _) in reexports() {
        if floor_of(&module).is_none() {
            unplaced.insert(module);
        }
    }
    (found, unplaced)
}

/// The modules `src/lib.rs` re-exports from the crates split out of this one, with the crate:
/// `pub use pi_platform::{procs, cli};` gives `(procs, pi_platform)`, `(cli, pi_platform)`;
/// `pub use pi_tools as tools;` gives `(tools, pi_tools)`. Code here keeps reading
/// `crate::<module>`, so each stays on the floor [`FLOORS`] names for it.
fn reexports() -> Vec<(String, String)> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let text = std::fs::read_to_string(lib).unwrap();
    let mut found = vec![];
    for item in text.split(';') {
        let Some(i) = item.find("pub use pi_") else {
            continue;
        };
        let item = &item[i + "pub use ".len()..];
        let krate: String = item
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let names: Vec<&str> = if let Some((_, alias)) = item.split_once(" as ") {
            vec![alias]
        } else if let Some((_, list)) = item.split_once('{') {
            list.trim_end().trim_end_matches('}').split(',').collect()
        } else {
            item.rsplit_once("::").map(|(_, n)| n).into_iter().collect()
        };
        for name in names.into_iter().map(str::trim).filter(|n| !n.is_empty()) {
            found.push((name.to_string(), krate.clone()));
        }
    }
    found
}

/// Every module [`FLOORS`] names is a file or directory of `src/` or a re-export of a split-out
/// crate, so the list cannot keep a module that moved or went.
#[test]
fn every_module_on_a_floor_exists() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let reexported: BTreeSet<String> = reexports().into_iter().map(|(m, _)| m).collect();
    assert!(
        reexported.contains("procs") && reexported.contains("cli"),
        "the re-exports of pi-platform not found in src/lib.rs: {reexported:?}"
    );
    let missing: Vec<&str> = FLOORS
        .iter()
        .flat_map(|(_, mods)| mods.iter().copied())
        .filter(|m| {
            !src.join(format!("{m}.rs")).is_file()
                && !src.join(m).is_dir()
                && !reexported.contains(*m)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "modules on a floor but not in src/: {missing:?}"
    );
}

/// The crates split out of this one keep the floor rule between themselves: a crate whose
/// modules are re-exported on one floor depends (`[dependencies]` of its `Cargo.toml`) on no
/// split-out crate of a higher floor.
#[test]
fn no_split_out_crate_depends_on_a_higher_floor() {
    // `pi_tools` → the highest floor of the modules re-exported from it.
    let mut floor_of_crate: BTreeMap<String, usize> = BTreeMap::new();
    for (module, krate) in reexports() {
        let floor = floor_of(&module).unwrap();
        let e = floor_of_crate
            .entry(krate.replace('_', "-"))
            .or_insert(floor);
        *e = (*e).max(floor);
    }
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (mut checked, mut upward) = (0, vec![]);
    for e in std::fs::read_dir(&crates).unwrap() {
        let manifest = e.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .map(|n| n.trim_matches('"').to_string())
            .unwrap_or_default();
        let Some(&own) = floor_of_crate.get(&name) else {
            continue;
        };
        checked += 1;
        let deps = text
            .split("\n[")
            .filter_map(|section| section.split_once(']'))
            .filter(|(head, _)| {
                head.ends_with("dependencies") && !head.ends_with("dev-dependencies")
            })
            .flat_map(|(_, body)| body.lines())
            .filter_map(|l| l.split(['.', ' ', '=']).next());
        for dep in deps {
            if let Some(&theirs) = floor_of_crate.get(dep) {
                if theirs > own {
                    upward.push(format!(
                        "{name} ({}) depends on {dep} ({})",
                        FLOORS[own].0, FLOORS[theirs].0
                    ));
                }
            }
        }
    }
    assert!(
        checked >= 1,
        "no split-out crate found under {}",
        crates.display()
    );
    assert!(
        upward.is_empty(),
        "upward crate dependencies:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_module_imports_a_higher_floor() {
    let (found, unplaced) = imports();
    let mut upward = vec![];
    let mut seen_debts = BTreeSet::new();
    for Import {
        rel,
        top,
        target,
        line,
    } in &found
    {
        let (own, theirs) = (floor_of(top).unwrap(), floor_of(target).unwrap());
        if theirs <= own {
            continue;
        }
        if NOT_YET.contains(&(rel.as_str(), target.as_str())) {
            seen_debts.insert((rel.clone(), target.clone()));
            continue;
        }
        upward.push(format!(
            "src/{rel}:{line}: `{top}` ({}) imports `{target}` ({})",
            FLOORS[own].0, FLOORS[theirs].0
        ));
    }
    assert!(
        unplaced.is_empty(),
        "modules on no floor (add them to FLOORS): {unplaced:?}"
    );
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
    let stale: Vec<_> = NOT_YET
        .iter()
        .filter(|(f, t)| !seen_debts.contains(&(f.to_string(), t.to_string())))
        .collect();
    assert!(
        stale.is_empty(),
        "these upward imports are gone: remove them from NOT_YET: {stale:?}"
    );
}

/// Modules of one floor may import each other, but not both ways round: no cycle of imports
/// runs through two or more top-level modules (issue 23), apart from the [`NOT_YET`] debts.
#[test]
fn no_import_cycle_crosses_a_top_level_module() {
    let (found, _) = imports();
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for i in &found {
        if !NOT_YET.contains(&(i.rel.as_str(), i.target.as_str())) {
            graph.entry(&i.top).or_default().insert(&i.target);
        }
    }
    // Depth-first search; a module met again while still on the path closes a cycle.
    fn visit<'a>(
        m: &'a str,
        graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        cycles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| *p == m) {
            let mut cycle = path[at..].to_vec();
            cycle.push(m);
            cycles.push(cycle.join(" -> "));
            return;
        }
        if !done.insert(m) {
            return;
        }
        path.push(m);
        for next in graph.get(m).into_iter().flatten() {
            visit(next, graph, path, done, cycles);
        }
        path.pop();
    }
    let (mut done, mut cycles) = (BTreeSet::new(), vec![]);
    for m in graph.keys() {
        visit(m, &graph, &mut vec![], &mut done, &mut cycles);
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_reader_finds_paths_and_skips_comments_and_tests() {
    let text = "use crate::a::B;\n// crate::c\nlet x = crate::d::e(pi_coding_agent::f::g);\n#[cfg(test)]\nuse crate::h;";
    let names: Vec<String> = crate_paths(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a", "d"]);
}

/// Files of `src/` allowed over [`MAX_FILE_LINES`] for now (issue 23), each to be split;
/// the test fails when one is no longer over, so the list only shrinks.
const LONG_FILES: &[&str] = &[];

/// Functions of the session runtime, RPC and main (`agent_session/`, `rpc/`, `main.rs`)
/// allowed over [`MAX_FN_LINES`] for now: (file under `src/`, function name). Shrinks only.
const LONG_FNS: &[(&str, &str)] = &[];

/// Issue 23: no non-test file over 1,000 lines.
const MAX_FILE_LINES: usize = 1000;
/// Issue 23: no function over 150 lines in the session runtime, RPC and main.
const MAX_FN_LINES: usize = 150;

/// `(name, first line, line count)` of each function in `text` (rustfmt layout: a function
/// ends at the first later line that is its indentation followed by `}`), outside tests.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let lines: Vec<&str> = code.lines().collect();
    let mut out = vec![];
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let mut words = body.split_whitespace();
        let mut word = words.next();
        while let Some(w) = word {
            if w.starts_with("pub") || ["async", "unsafe", "const", "extern"].contains(&w) {
                word = words.next();
            } else {
                break;
            }
        }
        if word != Some("fn") {
            continue;
        }
        let Some(name) = words.next() else { continue };
        let name: String = name
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        // A declaration without a body (a trait item) has no closing line of its own.
        if body.ends_with(';') {
            continue;
        }
        if let Some(end) = (i..lines.len()).find(|&j| lines[j] == close) {
            out.push((name, i + 1, end - i + 1));
        }
    }
    out
}

/// Issue 23: no non-test source file of any crate of the workspace (`crates/*/src/**/*.rs`,
/// found from this crate's `CARGO_MANIFEST_DIR/..`) is over [`MAX_FILE_LINES`] lines. Files
/// named `tests.rs` and files under a `tests/` directory are test code and not counted. The
/// only exceptions are [`LONG_FILES`] (paths under this crate's `src/`); one no longer over
/// the limit fails the test too, so the list only shrinks.
#[test]
fn no_source_file_of_any_crate_over_1000_lines() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let this_crate = Path::new(env!("CARGO_MANIFEST_DIR"))
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mut dirs: Vec<_> = std::fs::read_dir(&crates)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // A wrong root would find nothing and pass: insist on this crate and the others.
    assert!(
        names.contains(&this_crate) && names.contains(&"ai".to_string()) && names.len() > 2,
        "crates found under {}: {names:?}",
        crates.display()
    );
    let (mut long_files, mut seen_files) = (vec![], BTreeSet::new());
    for (dir, name) in dirs.iter().zip(&names) {
        let src = dir.join("src");
        let mut files = vec![];
        rust_files(&src, &mut files);
        files.sort();
        for file in &files {
            let rel = file
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if rel.ends_with("tests.rs") || rel.starts_with("tests/") || rel.contains("/tests/") {
                continue;
            }
            let n = std::fs::read_to_string(file).unwrap().lines().count();
            if n <= MAX_FILE_LINES {
                continue;
            }
            if *name == this_crate && LONG_FILES.contains(&rel.as_str()) {
                seen_files.insert(rel.clone());
            } else {
                long_files.push(format!("crates/{name}/src/{rel}: {n} lines"));
            }
        }
    }
    assert!(
        long_files.is_empty(),
        "files over {MAX_FILE_LINES} lines:\n{}",
        long_files.join("\n")
    );
    let stale: Vec<_> = LONG_FILES
        .iter()
        .filter(|f| !seen_files.contains(**f))
        .collect();
    assert!(
        stale.is_empty(),
        "no longer over {MAX_FILE_LINES} lines: remove from LONG_FILES: {stale:?}"
    );
}

/// Issue 23: no function of the session runtime, RPC and main over [`MAX_FN_LINES`] lines,
/// apart from [`LONG_FNS`] (which only shrinks).
#[test]
fn no_runtime_function_over_150_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    files.sort();
    let (mut long_fns, mut seen_fns) = (vec![], BTreeSet::new());
    for file in &files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel.ends_with("tests.rs") || rel.contains("/tests/") {
            continue;
        }
        let runtime =
            rel.starts_with("agent_session/") || rel.starts_with("rpc/") || rel == "main.rs";
        if !runtime {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (name, line, len) in functions(&text) {
            if len <= MAX_FN_LINES {
                continue;
            }
            if LONG_FNS.contains(&(rel.as_str(), name.as_str())) {
                seen_fns.insert((rel.clone(), name));
            } else {
                long_fns.push(format!("src/{rel}:{line}: fn {name}: {len} lines"));
            }
        }
    }
    assert!(
        long_fns.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        long_fns.join("\n")
    );
    let stale: Vec<_> = LONG_FNS
        .iter()
        .filter(|(f, n)| !seen_fns.contains(&(f.to_string(), n.to_string())))
        .collect();
    assert!(
        stale.is_empty(),
        "no longer over {MAX_FN_LINES} lines: remove from LONG_FNS: {stale:?}"
    );
}

#[test]
fn the_function_reader_measures_rustfmt_layout() {
    let text = "fn a() {\n    x;\n}\n\nimpl T {\n    pub(crate) async fn b(\n        y: u8,\n    ) -> u8 {\n        y\n    }\n}\n";
    let f = functions(text);
    assert_eq!(f, [("a".to_string(), 1, 3), ("b".to_string(), 6, 5)]);
}

/// Issue 23: the specification the code cites is in the repository. Every `<file>.md §<n>`
/// citation in the workspace's Rust sources, `docs/` and the README names a spec file in
/// `spec/` and a numbered heading of it (`## 4.`, `### 4.1 …`); a citation of a section
/// that does not exist fails, so a renumbered spec cannot leave comments pointing nowhere.
#[test]
fn every_spec_citation_resolves_to_a_heading_of_the_spec() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let spec_dir = root.join("spec");
    let mut sections: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in std::fs::read_dir(&spec_dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "md") {
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let heads = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with('#'))
            .filter_map(|l| section_number(l.trim_start_matches('#').trim_start()))
            .collect();
        sections.insert(name, heads);
    }
    assert!(
        sections.contains_key("rpc-protocol.md") && sections["rpc-protocol.md"].contains("4.1"),
        "spec/rpc-protocol.md with its §4.1 is missing"
    );
    let mut files = vec![];
    for dir in std::fs::read_dir(root.join("crates")).unwrap() {
        rust_files(&dir.unwrap().path(), &mut files);
    }
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    files.push(root.join("README.md"));
    let (mut checked, mut dangling) = (0, vec![]);
    for f in files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
    {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, _) in text.match_indices(".md §") {
            let name: String = text[..i]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let file = format!("{name}.md");
            let Some(heads) = sections.get(&file) else {
                continue; // another document's sections (e.g. upstream's docs)
            };
            let Some(number) = section_number(&text[i + ".md §".len()..]) else {
                continue;
            };
            checked += 1;
            if !heads.contains(&number) {
                dangling.push(format!("{}: {file} §{number}", f.display()));
            }
        }
    }
    assert!(checked > 100, "only {checked} citations found");
    assert!(
        dangling.is_empty(),
        "citations of missing sections: {dangling:#?}"
    );
}

/// The leading section number of a heading or citation: `4.1 Parameters` → `4.1`,
/// `4. Commands` → `4`; `None` when the text does not start with a digit.
fn section_number(text: &str) -> Option<String> {
    let text = text.trim_start_matches('§').trim_start();
    let number: String = text
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let number = number.trim_end_matches('.');
    (!number.is_empty() && number.starts_with(|c: char| c.is_ascii_digit()))
        .then(|| number.to_string())
}

/// The session's state locks stay few and ordered (issue 23): every `Mutex` field of
/// `agent_session`'s `Inner` is named in the lock order of the module docs ("# Locks"), and
/// there are at most six of them (the four state structs, the retry announcement, the rejected
/// images leaf).
#[test]
fn every_session_lock_is_in_the_written_lock_order() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/agent_session/mod.rs");
    let text = std::fs::read_to_string(path).unwrap();
    let order: String = text
        .lines()
        .skip_while(|l| l.trim() != "//! # Locks")
        .take_while(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !order.is_empty(),
        "no \"# Locks\" section in the module docs"
    );
    let body: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("struct Inner {"))
        .skip(1)
        .take_while(|l| !l.starts_with('}'))
        .collect();
    let locks: Vec<&str> = body
        .iter()
        .filter_map(|l| {
            let (name, ty) = l.trim().split_once(':')?;
            ty.trim().starts_with("Mutex<").then_some(name.trim())
        })
        .collect();
    assert!(!locks.is_empty(), "no Mutex field found in Inner");
    let unordered: Vec<&&str> = locks
        .iter()
        .filter(|n| !order.contains(&format!("`{n}`")))
        .collect();
    assert!(
        unordered.is_empty(),
        "session locks missing from the lock order: {unordered:?}"
    );
    assert!(locks.len() <= 6, "{} session locks: {locks:?}", locks.len());
}
