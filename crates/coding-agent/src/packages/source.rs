//! Package sources as written in settings `packages` and on the command line (upstream 1.6
//! `docs/packages.md` "Choose a source"): `npm:<name>[@<version>]`, `git:<host>/<path>[@ref]`
//! (also `git:git@host:path`, `git:https://…`), plain `https://` / `http://` / `ssh://` /
//! `git://` URLs (git), and everything else a local path.

/// Where a package declaration lives, which decides its install root and base directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `<agent>/settings.json`; installs under `<agent>/npm`, `<agent>/git`.
    User,
    /// `<cwd>/.pi/settings.json` (trusted projects only); installs under `<cwd>/.pi/npm|git`.
    Project,
    /// `-e <source>` for one run; cached under `<agent>/tmp/extensions/`.
    Temporary,
}

impl Scope {
    /// `user`, `project` or `temporary` (`sourceInfo.scope`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
            Scope::Temporary => "temporary",
        }
    }
}

/// An npm source: `npm:<spec>`, spec = `<name>[@<version or range or tag>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpmSource {
    /// What follows `npm:` (passed to `npm install`).
    pub spec: String,
    /// The package name (`@scope/name` or `name`).
    pub name: String,
    /// The version part after the name's `@`, if any.
    pub version: Option<String>,
    /// An exact version (`1.2.3`): never updated.
    pub pinned: bool,
}

/// A git source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSource {
    /// The URL `git clone` gets (shorthands become `https://<host>/<path>`).
    pub repo: String,
    /// The host (install folder's first part).
    pub host: String,
    /// `owner/repo` without `.git` (the rest of the install folder).
    pub path: String,
    /// The `@ref` (tag, branch or commit), if any; a ref pins the checkout.
    pub git_ref: Option<String>,
}

/// A parsed package source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// From the npm registry.
    Npm(NpmSource),
    /// A git repository.
    Git(GitSource),
    /// A file or folder, relative to the settings file's folder (or the cwd on the command line).
    Local(String),
}

/// Whether `s` is a local path: anything that does not start with a known remote prefix.
pub fn is_local_path(s: &str) -> bool {
    let t = s.trim();
    ![
        "npm:", "git:", "github:", "http:", "https:", "ssh:", "builtin:",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// Parses a source string (never fails: what is neither npm nor git is a local path).
pub fn parse(source: &str) -> Source {
    let t = source.trim();
    if let Some(spec) = t.strip_prefix("npm:") {
        return Source::Npm(parse_npm(spec.trim()));
    }
    if is_local_path(t) {
        return Source::Local(t.to_string());
    }
    match parse_git(t) {
        Some(g) => Source::Git(g),
        None => Source::Local(t.to_string()),
    }
}

fn parse_npm(spec: &str) -> NpmSource {
    // `@scope/name@range` or `name@range`: the version separator is the first `@` after the
    // name's own leading one.
    let skip = usize::from(spec.starts_with('@'));
    let (name, version) = match spec[skip..].find('@') {
        Some(i) if !spec[skip + i + 1..].is_empty() => (
            spec[..skip + i].to_string(),
            Some(spec[skip + i + 1..].to_string()),
        ),
        _ => (spec.to_string(), None),
    };
    let pinned = version
        .as_deref()
        .is_some_and(|v| semver::Version::parse(v.trim_start_matches('v')).is_ok());
    NpmSource {
        spec: spec.to_string(),
        name,
        version,
        pinned,
    }
}

/// Splits a trailing `@ref` off the path part of `url` (`repo`, `ref`).
fn split_ref(url: &str) -> (String, Option<String>) {
    let cut = |prefix: &str, rest: &str| -> (String, Option<String>) {
        match rest.find('@') {
            Some(i) if i > 0 && i + 1 < rest.len() => (
                format!("{prefix}{}", &rest[..i]),
                Some(rest[i + 1..].to_string()),
            ),
            _ => (url.to_string(), None),
        }
    };
    if let Some(rest) = url.strip_prefix("git@") {
        if let Some((host, path)) = rest.split_once(':') {
            return cut(&format!("git@{host}:"), path);
        }
        return (url.to_string(), None);
    }
    if let Some(i) = url.find("://") {
        let after = &url[i + 3..];
        let Some(slash) = after.find('/') else {
            return (url.to_string(), None);
        };
        let prefix = &url[..i + 3 + slash + 1];
        return cut(prefix, after[slash + 1..].trim_start_matches('/'));
    }
    match url.find('/') {
        Some(slash) => cut(&url[..slash + 1], &url[slash + 1..]),
        None => (url.to_string(), None),
    }
}

fn unsafe_part(s: &str, allow_slash: bool) -> bool {
    s.contains('\0')
        || s.contains('\\')
        || s.starts_with('/')
        || (!allow_slash && s.contains('/'))
        || s.split('/').any(|seg| seg == "..")
}

/// Parses a git source: with the `git:` prefix every shorthand form, without it only explicit
/// `http(s)://`, `ssh://`, `git://` URLs. `None` when it is not a usable git source.
pub fn parse_git(source: &str) -> Option<GitSource> {
    let t = source.trim();
    let (has_prefix, url) = match t.strip_prefix("git:") {
        Some(rest) => (true, rest.trim()),
        None => (false, t),
    };
    let lower = url.to_ascii_lowercase();
    let explicit = ["https://", "http://", "ssh://", "git://"]
        .iter()
        .any(|p| lower.starts_with(p));
    if !has_prefix && !explicit {
        return None;
    }
    let (repo_no_ref, git_ref) = split_ref(url);
    let (repo, host, path) = if let Some(rest) = repo_no_ref.strip_prefix("git@") {
        let (host, path) = rest.split_once(':')?;
        (repo_no_ref.clone(), host.to_string(), path.to_string())
    } else if explicit {
        let after = &repo_no_ref[repo_no_ref.find("://")? + 3..];
        let (authority, path) = after.split_once('/').unwrap_or((after, ""));
        let host_port = authority.rsplit('@').next().unwrap_or(authority);
        let host = match host_port.rsplit_once(':') {
            Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
            _ => host_port,
        };
        (repo_no_ref.clone(), host.to_string(), path.to_string())
    } else {
        let (host, path) = repo_no_ref.split_once('/')?;
        if !host.contains('.') && host != "localhost" {
            return None;
        }
        (
            format!("https://{repo_no_ref}"),
            host.to_string(),
            path.to_string(),
        )
    };
    let path = path.trim_start_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).to_string();
    if host.is_empty() || path.is_empty() || path.split('/').count() < 2 {
        return None;
    }
    if unsafe_part(&host, false) || unsafe_part(&path, true) {
        return None;
    }
    Some(GitSource {
        repo,
        host,
        path,
        git_ref,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npm_specs() {
        let Source::Npm(n) = parse("npm:@scope/pkg@1.2.3") else {
            panic!()
        };
        assert_eq!(
            (n.name.as_str(), n.version.as_deref(), n.pinned),
            ("@scope/pkg", Some("1.2.3"), true)
        );
        let Source::Npm(n) = parse("npm:pkg@^1") else {
            panic!()
        };
        assert_eq!((n.name.as_str(), n.pinned), ("pkg", false));
        let Source::Npm(n) = parse("npm:pkg") else {
            panic!()
        };
        assert_eq!((n.name.as_str(), n.version), ("pkg", None));
    }

    #[test]
    fn git_forms() {
        let g = parse_git("git:github.com/u/r@v1").unwrap();
        assert_eq!(g.repo, "https://github.com/u/r");
        assert_eq!((g.host.as_str(), g.path.as_str()), ("github.com", "u/r"));
        assert_eq!(g.git_ref.as_deref(), Some("v1"));
        let g = parse_git("https://github.com/u/r.git").unwrap();
        assert_eq!((g.path.as_str(), g.git_ref), ("u/r", None));
        let g = parse_git("git:git@github.com:u/r@main").unwrap();
        assert_eq!(g.repo, "git@github.com:u/r");
        assert_eq!(g.git_ref.as_deref(), Some("main"));
        let g = parse_git("git:git://127.0.0.1:9418/u/r").unwrap();
        assert_eq!(
            (g.host.as_str(), g.repo.as_str()),
            ("127.0.0.1", "git://127.0.0.1:9418/u/r")
        );
        // As upstream: a bare `git://` URL loses its scheme to the `git:` prefix.
        assert!(parse_git("git://127.0.0.1:9418/u/r").is_none());
        assert!(parse_git("github.com/u/r").is_none());
        assert!(parse_git("git:nodot/u/r").is_none());
        assert!(parse_git("git:github.com/u/../r").is_none());
        assert_eq!(parse("./x"), Source::Local("./x".into()));
    }
}
