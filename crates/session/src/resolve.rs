//! Choosing the session at start-up from the command line (spec `sessions.md` §1.4, §1.6;
//! upstream docs/cli.md "Sessions" and docs/sessions.md): `-c/--continue`,
//! `--session <path|id|id prefix>`, `--session-id <id>`, `--fork <path|id>`, `--no-session`,
//! and the session folder from `--session-dir` > `PI_CODING_AGENT_SESSION_DIR` > settings
//! `sessionDir` > `<agent dir>/sessions/--<cwd>--/`.
//!
//! Lookups by id read only the first line of each file ([`list_sessions`]), never the
//! transcript, so they stay cheap however large the sessions are.

use std::path::{Path, PathBuf};

use super::entry::SessionHeader;
use super::manager::{
    default_session_dir, find_most_recent_session, resolve_path, session_dir_path,
    validate_session_id, NewSessionOptions, SessionError, SessionManager,
};
use super::store;

/// The session-selection flags of the command line.
#[derive(Debug, Clone, Default)]
pub struct SessionFlags {
    /// `-c/--continue`: the most recent session of the cwd.
    pub continue_recent: bool,
    /// `--session <path|id|id prefix>`.
    pub session: Option<String>,
    /// `--session-id <id>`: open the project's session with this id, or create it.
    pub session_id: Option<String>,
    /// `--fork <path|id>`: copy a session into a new one in the cwd.
    pub fork: Option<String>,
    /// `--no-session`: in memory only.
    pub no_session: bool,
}

/// Why no session could be chosen. Display texts follow upstream's messages; `main` prints
/// them as `Error: <text>` (only [`ResolveError::NotFound`] bare, as upstream) and exits 1.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// `--fork` with `--session`, `--continue` or `--no-session`.
    #[error("--fork cannot be combined with {0}")]
    ForkConflict(String),
    /// `--session-id` with `--session` or `--continue`.
    #[error("--session-id cannot be combined with {0}")]
    SessionIdConflict(String),
    /// An id or id prefix that matches no session (never a new file named after it).
    #[error("No session found matching '{0}'")]
    NotFound(String),
    /// `--fork` with a `--session-id` that the project already has.
    #[error("Session already exists with id '{0}'")]
    IdExists(String),
    /// `--session <id>` found only in another project. Upstream asks interactively whether to
    /// fork it; headless there is nobody to ask, so this is refused with a hint.
    #[error("Session found in different project: {cwd}\nUse --fork {arg} to fork it into the current directory")]
    OtherProject {
        /// The session's recorded cwd.
        cwd: String,
        /// The argument given.
        arg: String,
    },
    /// The resumed session's recorded cwd is gone (upstream `MissingSessionCwdError`, which
    /// headless modes print before exiting 1).
    #[error("Stored session working directory does not exist: {session_cwd}\nSession file: {}\nCurrent working directory: {}", .session_file.display(), .fallback_cwd.display())]
    MissingCwd {
        /// The cwd recorded in the header.
        session_cwd: String,
        /// The session file.
        session_file: PathBuf,
        /// The process cwd.
        fallback_cwd: PathBuf,
    },
    /// Opening, creating or forking the file failed.
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// The chosen session and an optional warning for stderr.
#[derive(Debug)]
pub struct StartupSession {
    /// The store to run.
    pub store: SessionManager,
    /// E.g. "No project session found with id …; creating a new session with that id."
    pub warning: Option<String>,
}

/// The session folder override, by upstream's precedence: `--session-dir` >
/// `PI_CODING_AGENT_SESSION_DIR` when non-empty (`~` expanded) > settings `sessionDir` (`~`
/// expanded). `None` = the default per-cwd folder. A relative folder stays relative to the
/// process cwd (pi's cwd), as upstream keeps it: session files in it show as given (see
/// `paths::session_dir_path`).
pub fn session_dir_override(
    cli: Option<&Path>,
    env: Option<&str>,
    settings: Option<&str>,
) -> Option<PathBuf> {
    let expand = |s: &str| pi_config::expand_home(s);
    if let Some(dir) = cli {
        return Some(dir.to_path_buf());
    }
    if let Some(env) = env.filter(|e| !e.is_empty()) {
        return Some(expand(env));
    }
    settings.filter(|s| !s.is_empty()).map(expand)
}

/// One session file as listing sees it: its path, header and modification time.
#[derive(Debug, Clone)]
pub struct SessionListing {
    /// The `.jsonl` file.
    pub path: PathBuf,
    /// Its header (line 1).
    pub header: SessionHeader,
    /// File mtime (listing order: newest first).
    pub modified: std::time::SystemTime,
}

/// Every `*.jsonl` file in `dir` whose first line is a session header, newest (mtime) first.
/// Reads only headers. A missing folder lists nothing.
pub fn list_sessions(dir: &Path) -> Vec<SessionListing> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<SessionListing> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|path| {
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
            let header =
                store::read_first_value(&path).and_then(|v| SessionHeader::from_value(&v))?;
            Some(SessionListing {
                path,
                header,
                modified,
            })
        })
        .collect();
    out.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.path.cmp(&a.path)));
    out
}

/// Where sessions of `cwd` live and whether listings must filter by header cwd (a custom
/// folder shared by several projects).
struct Scope {
    dir: PathBuf,
    filter_cwd: Option<PathBuf>,
}

impl Scope {
    fn new(agent_dir: &Path, cwd: &Path, session_dir: Option<&Path>) -> Scope {
        let default = default_session_dir(agent_dir, cwd);
        match session_dir {
            Some(dir) if resolve_path(dir) != default => Scope {
                dir: session_dir_path(dir),
                filter_cwd: Some(resolve_path(cwd)),
            },
            _ => Scope {
                dir: default,
                filter_cwd: None,
            },
        }
    }

    fn local(&self) -> Vec<SessionListing> {
        let mut all = list_sessions(&self.dir);
        if let Some(cwd) = &self.filter_cwd {
            all.retain(|s| {
                !s.header.cwd.is_empty() && resolve_path(Path::new(&s.header.cwd)) == *cwd
            });
        }
        all
    }

    fn find_exact(&self, id: &str) -> Option<PathBuf> {
        self.local()
            .into_iter()
            .find(|s| s.header.id == id)
            .map(|s| s.path)
    }
}

/// What a `--session`/`--fork` argument names.
enum Target {
    /// A path (contains `/` or `\`, or ends in `.jsonl`), resolved against the cwd.
    Path(PathBuf),
    /// A session of this project.
    Local(PathBuf),
    /// A session of another project (cwd from its header).
    Global(PathBuf, String),
}

fn resolve_target(
    arg: &str,
    scope: &Scope,
    agent_dir: &Path,
    session_dir: Option<&Path>,
    cwd: &Path,
) -> Result<Target, ResolveError> {
    if arg.contains('/') || arg.contains('\\') || arg.ends_with(".jsonl") {
        let p = Path::new(arg);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        };
        return Ok(Target::Path(resolve_path(&p)));
    }
    let local = scope.local();
    if let Some(s) = local
        .iter()
        .find(|s| s.header.id == arg)
        .or_else(|| local.iter().find(|s| s.header.id.starts_with(arg)))
    {
        return Ok(Target::Local(s.path.clone()));
    }
    let all: Vec<SessionListing> = match session_dir {
        Some(dir) => list_sessions(&resolve_path(dir)),
        None => {
            let root = resolve_path(agent_dir).join("sessions");
            let mut all: Vec<SessionListing> = std::fs::read_dir(&root)
                .map(|r| {
                    r.filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.is_dir())
                        .flat_map(|d| list_sessions(&d))
                        .collect()
                })
                .unwrap_or_default();
            all.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.path.cmp(&a.path)));
            all
        }
    };
    all.iter()
        .find(|s| s.header.id == arg)
        .or_else(|| all.iter().find(|s| s.header.id.starts_with(arg)))
        .map(|s| Target::Global(s.path.clone(), s.header.cwd.clone()))
        .ok_or_else(|| ResolveError::NotFound(arg.to_string()))
}

/// Chooses the start-up session as upstream's `createSessionManager` does (headless):
///
/// * `--no-session`: in memory (with `--session-id` as its id);
/// * `--fork <arg>`: the named session copied into a new file of this project (id from
///   `--session-id`, which must not exist yet);
/// * `--session <arg>`: a path is opened (a missing file becomes a new session at exactly that
///   path); an id or id prefix opens the project's newest match; a match only in another
///   project is refused ([`ResolveError::OtherProject`]); no match is an error;
/// * `-c`: the most recent session of the project, else a new one;
/// * `--session-id <id>`: the project's session with that id, else a new one with that id;
/// * otherwise a new session.
///
/// `session_dir` is the override from [`session_dir_override`]. Opening writes nothing except
/// what [`SessionManager::open_with`] documents (empty and old-version files).
pub fn open_startup_session(
    flags: &SessionFlags,
    cwd: &Path,
    agent_dir: &Path,
    session_dir: Option<&Path>,
) -> Result<StartupSession, ResolveError> {
    if flags.fork.is_some() {
        let conflicts: Vec<&str> = [
            flags.session.is_some().then_some("--session"),
            flags.continue_recent.then_some("--continue"),
            flags.no_session.then_some("--no-session"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !conflicts.is_empty() {
            return Err(ResolveError::ForkConflict(conflicts.join(", ")));
        }
    }
    if let Some(id) = &flags.session_id {
        let conflicts: Vec<&str> = [
            flags.session.is_some().then_some("--session"),
            flags.continue_recent.then_some("--continue"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !conflicts.is_empty() {
            return Err(ResolveError::SessionIdConflict(conflicts.join(", ")));
        }
        validate_session_id(id)?;
    }
    let done = |store| {
        Ok(StartupSession {
            store,
            warning: None,
        })
    };
    if flags.no_session {
        return done(SessionManager::in_memory_with(
            cwd,
            flags.session_id.clone(),
        ));
    }
    let scope = Scope::new(agent_dir, cwd, session_dir);
    let new_dir = session_dir
        .map(session_dir_path)
        .unwrap_or_else(|| scope.dir.clone());
    if let Some(arg) = &flags.fork {
        if let Some(id) = &flags.session_id {
            if scope.find_exact(id).is_some() {
                return Err(ResolveError::IdExists(id.clone()));
            }
        }
        let source = match resolve_target(arg, &scope, agent_dir, session_dir, cwd)? {
            Target::Path(p) | Target::Local(p) | Target::Global(p, _) => p,
        };
        return done(SessionManager::fork_from_with(
            &source,
            cwd,
            &new_dir,
            flags.session_id.clone(),
        )?);
    }
    if let Some(arg) = &flags.session {
        return match resolve_target(arg, &scope, agent_dir, session_dir, cwd)? {
            Target::Path(p) | Target::Local(p) => done(SessionManager::open_with(
                &p,
                session_dir.map(session_dir_path).as_deref(),
                None,
            )?),
            Target::Global(_, session_cwd) => Err(ResolveError::OtherProject {
                cwd: session_cwd,
                arg: arg.clone(),
            }),
        };
    }
    if flags.continue_recent {
        return match find_most_recent_session(&scope.dir, scope.filter_cwd.as_deref()) {
            Some(p) => done(SessionManager::open_listed(&p, &scope.dir)?),
            None => done(SessionManager::create(&scope.dir, cwd)),
        };
    }
    let mut warning = None;
    if let Some(id) = &flags.session_id {
        if let Some(p) = scope.find_exact(id) {
            return done(SessionManager::open_with(&p, Some(&scope.dir), None)?);
        }
        warning = Some(format!(
            "No project session found with id '{id}'; creating a new session with that id."
        ));
    }
    let store = SessionManager::create_with(
        &scope.dir,
        cwd,
        NewSessionOptions {
            id: flags.session_id.clone(),
            parent_session: None,
        },
    )?;
    Ok(StartupSession { store, warning })
}

/// Refuses a session whose recorded cwd no longer exists (upstream
/// `getMissingSessionCwdIssue`: only for sessions with a file and a non-empty cwd).
pub fn check_session_cwd(store: &SessionManager, fallback_cwd: &Path) -> Result<(), ResolveError> {
    let Some(file) = store.session_file() else {
        return Ok(());
    };
    let cwd = &store.header().cwd;
    if cwd.is_empty() || Path::new(cwd).exists() {
        return Ok(());
    }
    Err(ResolveError::MissingCwd {
        session_cwd: cwd.clone(),
        session_file: file.to_path_buf(),
        fallback_cwd: fallback_cwd.to_path_buf(),
    })
}
