//! Cross-process locks that upstream pi honours too.
//!
//! Upstream pi 1.6 guards `auth.json` and `mcp-auth.json` (every read-modify-write, and the
//! OAuth refreshes) with the `proper-lockfile` package: the lock is the **directory**
//! `<file>.lock`, made with `mkdir` (atomic: one process wins), touched while it is held, and
//! removed on release; a lock whose mtime is older than the stale time is taken to belong to a
//! dead process and taken over. [`DirLock`] does the same, so ours and upstream's processes
//! sharing one agent directory exclude each other.
//!
//! Before this, ours locked with `flock` on a *file* named `auth.json.lock` that stayed behind;
//! upstream then failed every later access to its credentials (`auth check` → `invalid_state`),
//! because it cannot remove a file with `rmdir`. [`DirLock::acquire`] removes such a leftover
//! file (nobody else creates one).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

/// How a lock is waited for and kept.
#[derive(Debug, Clone, Copy)]
pub struct LockTiming {
    /// A held lock untouched for longer than this (ms precision) is taken over.
    pub stale: Duration,
    /// How long to wait for another holder before giving up ([`LockError::Busy`]).
    pub wait: Duration,
    /// Pause between attempts.
    pub retry: Duration,
}

impl LockTiming {
    /// `auth.json` / `mcp-auth.json` read-modify-writes: stale after 10 s (proper-lockfile's
    /// default, which upstream's synchronous lock uses; ours is touched every 5 s while held,
    /// so a refresh that holds it during an HTTP call stays fresh for upstream's 10 and 30 s
    /// stale times), waited for up to 30 s (upstream's asynchronous wait).
    pub const AUTH_FILE: LockTiming = LockTiming {
        stale: Duration::from_secs(10),
        wait: Duration::from_secs(30),
        retry: Duration::from_millis(20),
    };
    /// One MCP server's token refresh (upstream `extensions/mcp/oauth.js`): stale after 20 s,
    /// waited for up to 25 s in 100 ms steps.
    pub const MCP_REFRESH: LockTiming = LockTiming {
        stale: Duration::from_secs(20),
        wait: Duration::from_secs(25),
        retry: Duration::from_millis(100),
    };
}

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live process held it for the whole wait.
    #[error("{0} is held by another process")]
    Busy(PathBuf),
    /// The lock directory could not be made, inspected or removed.
    #[error("cannot lock {path}: {source}")]
    Io {
        /// The lock directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// A held lock: the directory `<target>.lock`; released (removed) on drop. A keeper thread
/// touches it every half stale time while it is held.
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    stop: Option<mpsc::Sender<()>>,
    keeper: Option<std::thread::JoinHandle<()>>,
}

/// `path` with every symlink of its last component followed (at most 40, as the kernel), so a
/// write through a link replaces the file it points to instead of the link (dotfiles setups
/// link `auth.json`; upstream writes through the link). A path that is no link is returned
/// as it is; a dangling link resolves to the missing file it names.
pub fn resolve_symlinks(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        let Ok(target) = std::fs::read_link(&p) else {
            break;
        };
        p = match p.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    p
}

/// `<target>.lock`, `target` resolved through symlinks when asked (upstream locks the real
/// file, so aliases of one `auth.json` share one lock).
pub fn lock_path_of(target: &Path, resolve: bool) -> PathBuf {
    let real = if resolve {
        resolve_symlinks(target)
    } else {
        target.to_path_buf()
    };
    let mut name = real.as_os_str().to_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

fn is_stale(path: &Path, stale: Duration) -> std::io::Result<bool> {
    let modified = std::fs::metadata(path)?.modified()?;
    Ok(SystemTime::now()
        .duration_since(modified)
        .is_ok_and(|age| age > stale))
}

impl DirLock {
    /// Takes the lock of `target` (`resolve`: through symlinks), waiting as `timing` says.
    /// Blocking: call it off the async workers (`tokio::task::spawn_blocking`).
    pub fn acquire(target: &Path, resolve: bool, timing: LockTiming) -> Result<DirLock, LockError> {
        let path = lock_path_of(target, resolve);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let deadline = Instant::now() + timing.wait;
        loop {
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Self::held(path, timing.stale)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(e)),
            }
            match std::fs::symlink_metadata(&path) {
                // A plain file: the flock file older versions of ours left behind.
                Ok(m) if m.is_file() => {
                    std::fs::remove_file(&path)
                        .or_else(ignore_missing)
                        .map_err(io)?;
                    continue;
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(e)),
            }
            match is_stale(&path, timing.stale) {
                Ok(true) => {
                    std::fs::remove_dir(&path)
                        .or_else(ignore_missing)
                        .map_err(io)?;
                    continue;
                }
                Ok(false) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(e)),
            }
            if Instant::now() >= deadline {
                return Err(LockError::Busy(path));
            }
            std::thread::sleep(timing.retry);
        }
    }

    fn held(path: PathBuf, stale: Duration) -> DirLock {
        let (stop, stopped) = mpsc::channel::<()>();
        let touched = path.clone();
        let keeper = std::thread::Builder::new()
            .name("pi-lock-keeper".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(stale / 2) {
                    if let Ok(dir) = std::fs::File::open(&touched) {
                        let _ = dir.set_modified(SystemTime::now());
                    }
                }
            })
            .ok();
        DirLock {
            path,
            stop: Some(stop),
            keeper,
        }
    }

    /// The lock directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn ignore_missing(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == std::io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUICK: LockTiming = LockTiming {
        stale: Duration::from_millis(400),
        wait: Duration::from_millis(150),
        retry: Duration::from_millis(10),
    };

    #[test]
    fn a_held_lock_is_a_directory_that_excludes_others_and_goes_on_release() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("auth.json");
        let held = DirLock::acquire(&target, true, QUICK).unwrap();
        assert!(dir.path().join("auth.json.lock").is_dir());
        assert!(matches!(
            DirLock::acquire(&target, true, QUICK),
            Err(LockError::Busy(_))
        ));
        // Held past its stale time, it is kept fresh by the keeper.
        std::thread::sleep(Duration::from_millis(600));
        assert!(matches!(
            DirLock::acquire(&target, true, QUICK),
            Err(LockError::Busy(_))
        ));
        drop(held);
        assert!(!dir.path().join("auth.json.lock").exists());
        DirLock::acquire(&target, true, QUICK).unwrap();
    }

    #[test]
    fn a_stale_lock_and_a_leftover_lock_file_are_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("auth.json");
        let lock = dir.path().join("auth.json.lock");
        std::fs::create_dir(&lock).unwrap();
        let old = SystemTime::now() - Duration::from_secs(5);
        std::fs::File::open(&lock)
            .unwrap()
            .set_modified(old)
            .unwrap();
        drop(DirLock::acquire(&target, true, QUICK).unwrap());
        std::fs::write(&lock, "").unwrap();
        let held = DirLock::acquire(&target, true, QUICK).unwrap();
        assert!(lock.is_dir());
        drop(held);
    }
}
