//! `pi models pull` against a local HTTP server standing in for the Hugging Face hub.
//!
//! The fake hub answers what `hf-hub` asks, the way huggingface.co does for LFS files:
//! `GET /api/models/<repo>/revision/<rev>` lists the repository's files;
//! `GET /<repo>/resolve/<rev>/<file>` answers `302` to a second server (the "CDN") with the
//! `x-repo-commit`, `x-linked-etag` (the file's sha256) and `x-linked-size` headers; the CDN
//! serves the bytes with `Range` support (`206` + `content-range`).

use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// A file the fake hub serves: its bytes and the checksum it reports for them.
struct HubFile {
    body: Vec<u8>,
    sha256: String,
}

type Files = Arc<HashMap<String, HubFile>>;

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A fake GGUF body: the magic, then a few hundred KiB of pattern.
fn fake_gguf(seed: u8) -> Vec<u8> {
    let mut body = b"GGUF\x03\x00\x00\x00".to_vec();
    body.extend((0..300_000u32).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    body
}

struct FakeHub {
    endpoint: String,
    _runtime: tokio::runtime::Runtime,
}

/// Starts the hub and its CDN on 127.0.0.1 (ephemeral ports). `files` maps `owner/repo/file`.
fn start_hub(files: HashMap<String, HubFile>) -> FakeHub {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let files: Files = Arc::new(files);
    let endpoint = runtime.block_on(async {
        let cdn_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let cdn_addr = cdn_listener.local_addr().unwrap();
        let hub_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let hub_addr = hub_listener.local_addr().unwrap();

        let cdn_files = files.clone();
        let cdn = Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
            let files = cdn_files.clone();
            async move { cdn_response(&files, &uri, &headers) }
        });
        let hub_files = files.clone();
        let cdn_base = format!("http://{cdn_addr}");
        let hub = Router::new().fallback(move |uri: Uri| {
            let files = hub_files.clone();
            let cdn_base = cdn_base.clone();
            async move { hub_response(&files, &uri, &cdn_base) }
        });
        tokio::spawn(async move { axum::serve(cdn_listener, cdn).await.unwrap() });
        tokio::spawn(async move { axum::serve(hub_listener, hub).await.unwrap() });
        format!("http://{hub_addr}")
    });
    FakeHub {
        endpoint,
        _runtime: runtime,
    }
}

fn not_found() -> Response {
    Response::builder()
        .status(StatusCode::NOT_FOUND)
        .header("x-error-code", "EntryNotFound")
        .body(Body::from("Entry not found"))
        .unwrap()
}

fn hub_response(files: &Files, uri: &Uri, cdn_base: &str) -> Response {
    let path = uri.path().trim_start_matches('/');
    if let Some(rest) = path.strip_prefix("api/models/") {
        // <owner>/<repo>/revision/<rev>
        let Some((repo, _rev)) = rest.split_once("/revision/") else {
            return not_found();
        };
        let prefix = format!("{repo}/");
        let mut siblings: Vec<serde_json::Value> = files
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .map(|f| serde_json::json!({ "rfilename": f }))
            .collect();
        if siblings.is_empty() {
            return not_found();
        }
        siblings.push(serde_json::json!({ "rfilename": "README.md" }));
        let body = serde_json::json!({ "id": repo, "sha": COMMIT, "siblings": siblings });
        return Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
    }
    // <owner>/<repo>/resolve/<rev>/<file>
    let parts: Vec<&str> = path.splitn(5, '/').collect();
    let [owner, repo, "resolve", _rev, file] = parts.as_slice() else {
        return not_found();
    };
    let key = format!("{owner}/{repo}/{file}");
    let Some(f) = files.get(&key) else {
        return not_found();
    };
    Response::builder()
        .status(StatusCode::FOUND)
        .header(header::LOCATION, format!("{cdn_base}/blobs/{key}"))
        .header("x-repo-commit", COMMIT)
        .header("x-linked-etag", format!("\"{}\"", f.sha256))
        .header("x-linked-size", f.body.len().to_string())
        .header(header::ETAG, "\"0a1b2c3d4e5f60718293a4b5c6d7e8f901234567\"")
        .body(Body::empty())
        .unwrap()
}

fn cdn_response(files: &Files, uri: &Uri, headers: &HeaderMap) -> Response {
    let key = uri.path().trim_start_matches("/blobs/");
    let Some(f) = files.get(key) else {
        return not_found();
    };
    let total = f.body.len();
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.split_once('-'))
        .and_then(|(a, b)| {
            let start: usize = a.parse().ok()?;
            let end: usize = if b.is_empty() {
                total - 1
            } else {
                b.parse().ok()?
            };
            Some((start, end.min(total - 1)))
        });
    match range {
        Some((start, end)) if start <= end => Response::builder()
            .status(StatusCode::PARTIAL_CONTENT)
            .header(
                header::CONTENT_RANGE,
                format!("bytes {start}-{end}/{total}"),
            )
            .header(header::ACCEPT_RANGES, "bytes")
            .header(header::CONTENT_LENGTH, (end - start + 1).to_string())
            .body(Body::from(f.body[start..=end].to_vec()))
            .unwrap(),
        Some(_) => Response::builder()
            .status(StatusCode::RANGE_NOT_SATISFIABLE)
            .header(header::CONTENT_RANGE, format!("bytes */{total}"))
            .body(Body::empty())
            .unwrap(),
        None => Response::builder()
            .header(header::ACCEPT_RANGES, "bytes")
            .header(header::CONTENT_LENGTH, total.to_string())
            .body(Body::from(f.body.clone()))
            .unwrap(),
    }
}

/// Runs `pi <args>` with the hub at `endpoint` and the agent dir `agent_dir`; only 127.0.0.1
/// is reachable (no proxies).
fn pi(endpoint: &str, agent_dir: &Path, home: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pi"));
    cmd.args(args)
        .env("HF_ENDPOINT", endpoint)
        .env("PI_CODING_AGENT_DIR", agent_dir)
        .env("HOME", home)
        .env("HF_HOME", home.join("hf"))
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("HF_TOKEN");
    for var in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        cmd.env_remove(var);
    }
    cmd.output().expect("run pi")
}

fn gguf_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".gguf"))
        .collect();
    names.sort();
    names
}

#[test]
fn pull_downloads_verifies_and_places_the_gguf_with_progress_on_stderr() {
    let q4 = fake_gguf(1);
    let q8 = fake_gguf(2);
    let hub = start_hub(HashMap::from([
        (
            "org/tiny-GGUF/tiny-Q4_K_M.gguf".to_string(),
            HubFile {
                sha256: sha256_hex(&q4),
                body: q4.clone(),
            },
        ),
        (
            "org/tiny-GGUF/tiny-Q8_0.gguf".to_string(),
            HubFile {
                sha256: sha256_hex(&q8),
                body: q8.clone(),
            },
        ),
    ]));
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let models = agent.join("models");

    // An explicit repo/file.
    let out = pi(
        &hub.endpoint,
        &agent,
        tmp.path(),
        &["models", "pull", "org/tiny-GGUF/tiny-Q8_0.gguf"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stderr:\n{stderr}\nstdout:\n{stdout}");
    let dest = models.join("tiny-Q8_0.gguf");
    assert_eq!(std::fs::read(&dest).unwrap(), q8, "downloaded bytes");
    assert!(
        stderr.contains("Downloading org/tiny-GGUF/tiny-Q8_0.gguf"),
        "{stderr}"
    );
    assert!(stderr.contains("100%"), "progress on stderr: {stderr}");
    assert!(!stdout.contains('%'), "progress stays off stdout: {stdout}");
    assert_eq!(stdout.trim(), dest.display().to_string());
    assert!(
        !models.join(".downloads").exists(),
        "the download cache is cleaned up"
    );

    // A repository alone: the preferred quantization (Q4_K_M) is picked from its listing.
    let out = pi(
        &hub.endpoint,
        &agent,
        tmp.path(),
        &["models", "pull", "org/tiny-GGUF"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("Picked tiny-Q4_K_M.gguf"), "{stderr}");
    assert_eq!(std::fs::read(models.join("tiny-Q4_K_M.gguf")).unwrap(), q4);

    // Pulling again leaves the file alone.
    let out = pi(
        &hub.endpoint,
        &agent,
        tmp.path(),
        &["models", "pull", "org/tiny-GGUF:Q8_0"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("already in"), "{stderr}");

    let out = pi(&hub.endpoint, &agent, tmp.path(), &["models", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success());
    // The runtime's defaults go to stderr, so stdout stays `name\tsize` lines.
    if cfg!(feature = "local") {
        assert!(
            stderr.contains("decoding thread")
                && stderr.contains("repeat penalty 1.1 over 64 tokens")
                && stderr.contains("output cap 4096 tokens"),
            "{stderr}"
        );
    } else {
        assert!(stderr.contains("no local runtime"), "{stderr}");
    }
    assert!(stdout.lines().all(|l| l.contains('\t')), "{stdout}");
    assert!(
        stdout.contains("tiny-Q4_K_M.gguf") && stdout.contains("tiny-Q8_0.gguf"),
        "{stdout}"
    );
    assert_eq!(gguf_files(&models), ["tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"]);
}

#[test]
fn pull_with_a_wrong_checksum_fails_and_leaves_no_file() {
    let body = fake_gguf(3);
    let hub = start_hub(HashMap::from([(
        "org/bad-GGUF/bad-Q4_K_M.gguf".to_string(),
        HubFile {
            // The checksum of other bytes: the download must be rejected.
            sha256: sha256_hex(b"something else"),
            body,
        },
    )]));
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let models = agent.join("models");

    let out = pi(
        &hub.endpoint,
        &agent,
        tmp.path(),
        &["models", "pull", "org/bad-GGUF/bad-Q4_K_M.gguf"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {stderr}");
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
    assert!(stderr.contains(&sha256_hex(b"something else")), "{stderr}");
    assert!(gguf_files(&models).is_empty(), "no model file is left");
    let leftovers: Vec<_> = walk(&models);
    assert!(leftovers.is_empty(), "nothing left behind: {leftovers:?}");

    // A file the hub does not have: a clear error, no file.
    let out = pi(
        &hub.endpoint,
        &agent,
        tmp.path(),
        &["models", "pull", "org/bad-GGUF/missing.gguf"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("org/bad-GGUF/missing.gguf was not found on the hub"),
        "{stderr}"
    );
    assert!(gguf_files(&models).is_empty());
}

/// Every file under `dir` (recursively).
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
