//! The extension SDK: upstream's real npm packages at the version pi pins
//! (`@earendil-works/pi-coding-agent@1.6.0` with its dependencies `pi-ai`, `pi-agent-core`,
//! `pi-tui` and `typebox`), whose modules the extension host resolves extension imports to
//! (host.mjs, `SDK_MODULES`: upstream's loader aliases, `core/extensions/loader.js`), so an
//! extension sees everything upstream exports, not a hand-written subset.
//!
//! The packages are fetched once into a cache the way upstream's package manager fetches npm
//! packages (`npm install <spec> --prefix <dir>`, its `core/package-manager.js`), at the first
//! start of the host that finds the cache missing, so a run without extensions never pays for
//! it. The cache is `PI_SDK_DIR` or `${XDG_CACHE_HOME:-~/.cache}/pi-rust/sdk-1.6.0`: one per
//! pi version and machine, shared by every agent directory (the SDK is part of pi, not user
//! data). Filling it: under a lock (`<dir>.lock`, [`DirLock`]) so two pi processes do not
//! install at once, into `<dir>.partial`, then the marker `.complete` is written and the folder
//! renamed to `<dir>` (atomic: a cache is complete or absent). Offline (`PI_OFFLINE`, as
//! upstream skips package installs) or without npm, the host falls back to its stand-ins
//! with one warning.

use crate::config::lock::{DirLock, LockError, LockTiming};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The npm package whose dependency tree is the SDK.
pub const SDK_PACKAGE: &str = "@earendil-works/pi-coding-agent";
/// The pinned version (the upstream release pi implements).
pub const SDK_VERSION: &str = "1.6.0";
/// The file whose presence marks a complete cache; it holds `<package>@<version>`.
pub const COMPLETE_MARKER: &str = ".complete";
/// The longest an `npm install` may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// The cache lock: held through the install (touched every 30 s), waited for as long as an
/// install may take.
const LOCK_TIMING: LockTiming = LockTiming {
    stale: Duration::from_secs(60),
    wait: Duration::from_secs(660),
    retry: Duration::from_millis(250),
};

/// Why the SDK cache could not be filled.
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    /// `PI_OFFLINE` is set: no network access.
    #[error("offline (PI_OFFLINE is set)")]
    Offline,
    /// No cache location: neither `PI_SDK_DIR`, `XDG_CACHE_HOME` nor `HOME` is set.
    #[error("no cache folder (set PI_SDK_DIR or HOME)")]
    NoDir,
    /// `npm` could not be started.
    #[error("npm could not be started ({0})")]
    NoNpm(std::io::Error),
    /// `npm install` failed; the last lines of its output.
    #[error("`npm install` failed ({status}): {output}")]
    Install {
        /// The exit status.
        status: String,
        /// The end of npm's stdout and stderr.
        output: String,
    },
    /// `npm install` ran longer than allowed and was stopped.
    #[error("`npm install` took longer than {0} s")]
    Timeout(u64),
    /// The lock could not be taken.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// A file operation on the cache failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// The cache folder: `PI_SDK_DIR`, else `${XDG_CACHE_HOME:-$HOME/.cache}/pi-rust/sdk-<version>`;
/// `None` when none of these variables is set.
pub fn sdk_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var("PI_SDK_DIR") {
        return Some(d);
    }
    let cache = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))?;
    Some(cache.join("pi-rust").join(format!("sdk-{SDK_VERSION}")))
}

/// Whether `dir` holds a complete cache (its marker and the package's manifest).
pub fn is_complete(dir: &Path) -> bool {
    dir.join(COMPLETE_MARKER).is_file()
        && dir
            .join("node_modules")
            .join(SDK_PACKAGE)
            .join("package.json")
            .is_file()
}

/// `PI_OFFLINE` as upstream reads it (`1`, `true` or `yes`, any case).
pub fn offline() -> bool {
    std::env::var("PI_OFFLINE").is_ok_and(|v| {
        let v = v.to_ascii_lowercase();
        v == "1" || v == "true" || v == "yes"
    })
}

/// Makes `dir` a complete cache: at once when it is one, else (not `offline`) by
/// `npm install` under the lock. Blocking (minutes on a first install): call it off the async
/// workers. Prints one line on stderr before installing.
pub fn ensure(dir: &Path, offline: bool) -> Result<(), SdkError> {
    if is_complete(dir) {
        return Ok(());
    }
    if offline {
        return Err(SdkError::Offline);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SdkError::Io { path, source }
    };
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let _lock = DirLock::acquire(dir, false, LOCK_TIMING)?;
    if is_complete(dir) {
        return Ok(()); // another pi filled it while this one waited
    }
    let mut partial = dir.as_os_str().to_os_string();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    remove_all(&partial).map_err(io(&partial))?;
    eprintln!(
        "Installing the extension SDK ({SDK_PACKAGE}@{SDK_VERSION}) into {} (once; npm, network)...",
        dir.display()
    );
    npm_install(&partial)?;
    if !partial
        .join("node_modules")
        .join(SDK_PACKAGE)
        .join("package.json")
        .is_file()
    {
        return Err(SdkError::Install {
            status: "exit status 0".into(),
            output: format!("{SDK_PACKAGE} is not in {}", partial.display()),
        });
    }
    let marker = partial.join(COMPLETE_MARKER);
    std::fs::write(&marker, format!("{SDK_PACKAGE}@{SDK_VERSION}\n")).map_err(io(&marker))?;
    remove_all(dir).map_err(io(dir))?;
    std::fs::rename(&partial, dir).map_err(io(dir))?;
    Ok(())
}

fn remove_all(p: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// `npm install <package>@<version> --prefix <into>` with upstream's package-manager flags
/// (`--legacy-peer-deps --no-audit --no-fund`), production dependencies only and no install
/// scripts (none of the SDK's modules needs one). Output is kept for the error only: pi's
/// stdout is the RPC channel.
fn npm_install(into: &Path) -> Result<(), SdkError> {
    let spec = format!("{SDK_PACKAGE}@{SDK_VERSION}");
    let mut child = Command::new("npm")
        .arg("install")
        .arg(&spec)
        .arg("--prefix")
        .arg(into)
        .args([
            "--legacy-peer-deps",
            "--no-audit",
            "--no-fund",
            "--omit=dev",
            "--ignore-scripts",
            "--loglevel=error",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(SdkError::NoNpm)?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut s);
            }
            s
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + INSTALL_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SdkError::Timeout(INSTALL_TIMEOUT.as_secs()));
            }
            Err(e) => {
                return Err(SdkError::Io {
                    path: into.to_path_buf(),
                    source: e,
                })
            }
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut text = out.join().unwrap_or_default();
    text.extend(err.join().unwrap_or_default());
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    Err(SdkError::Install {
        status: status.to_string(),
        output: lines[lines.len().saturating_sub(5)..].join(" | "),
    })
}

/// The SDK folder for the host, filled first when it is missing (see [`ensure`]), or `None`
/// after one warning on stderr: the host then uses its stand-ins.
pub async fn prepare() -> Option<PathBuf> {
    let Some(dir) = sdk_dir() else {
        warn_fallback(None, &SdkError::NoDir);
        return None;
    };
    if is_complete(&dir) {
        return Some(dir);
    }
    let offline = offline();
    let d = dir.clone();
    let r = tokio::task::spawn_blocking(move || ensure(&d, offline))
        .await
        .unwrap_or_else(|e| {
            Err(SdkError::Io {
                path: dir.clone(),
                source: std::io::Error::other(e.to_string()),
            })
        });
    match r {
        Ok(()) => Some(dir),
        Err(e) => {
            warn_fallback(Some(&dir), &e);
            None
        }
    }
}

fn warn_fallback(dir: Option<&Path>, e: &SdkError) {
    let at = dir
        .map(|d| format!(" in {}", d.display()))
        .unwrap_or_default();
    eprintln!(
        "Warning: the extension SDK ({SDK_PACKAGE}@{SDK_VERSION}) is not installed{at} and could not be: {e}; \
         extensions get pi's stand-ins for its modules (names they lack are undefined). \
         It is installed at the next start with npm and network access."
    );
}
