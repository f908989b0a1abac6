//! The tool permission policy (issue 26): settings key `permissions` and the
//! `--permission-mode` flag, parsed into a [`PermissionPolicy`] that decides each tool call
//! as [`Verdict::Allow`], [`Verdict::Deny`] or [`Verdict::Ask`]. Asking the client is the
//! session's part (`agent_session/permission.rs`); this module only parses and matches.
//!
//! Settings shape (agent-dir `settings.json`, and a trusted project's `.pi/settings.json`):
//! `{"permissions": {"mode": "off"|"ask"|"deny", "allow": [rule], "deny": [rule],
//! "askTimeoutMs": n}}`. The project's `mode`, `allow` and `askTimeoutMs` replace the global
//! ones; `deny` rules of both files apply (a project cannot lift a global deny). Default: mode
//! `off`, no rules, 60000 ms.
//!
//! A rule is `tool` (every call of that tool, e.g. `mcp__server__tool`) or `tool(pattern)`:
//! for `bash` a glob over the command line (`*` crosses `/`); for `read`, `edit`, `write`,
//! `grep`, `find` and `ls` a glob over the `path` argument relative to the cwd (`*` stays in
//! one path segment, `**` crosses them). A path outside the cwd is matched only by a pattern
//! that starts with `/`. An allow pattern on `bash` never matches a command line with shell
//! control characters (`;`, `&`, `|`, `` ` ``, `$(`, `<`, `>`, newline) that the pattern
//! itself does not contain, so `bash(git *)` does not allow `git log; curl x | sh`.
//!
//! Order: a deny rule refuses in every mode; then an allow rule (or a session's "allow
//! always") lets the call run; then the mode decides (`off` runs it, `deny` refuses it, `ask`
//! asks).

use globset::{Glob, GlobBuilder, GlobMatcher};
use serde_json::{Map, Value};
use std::path::Path;
use std::time::Duration;

/// The default `permissions.askTimeoutMs`: how long an `ask` waits for the client's answer.
pub const DEFAULT_ASK_TIMEOUT_MS: u64 = 60_000;

/// Tools whose rule pattern is matched against their `path` argument.
const PATH_TOOLS: [&str; 6] = ["read", "edit", "write", "grep", "find", "ls"];

/// Tools whose `path` argument is optional and defaults to the cwd.
const OPTIONAL_PATH_TOOLS: [&str; 3] = ["grep", "find", "ls"];

/// Characters that chain, substitute or redirect in a shell command line.
const SHELL_CONTROL: [char; 7] = [';', '&', '|', '`', '<', '>', '\n'];

/// `permissions.mode` / `--permission-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionMode {
    /// `off` (default): calls no rule refuses run.
    #[default]
    Off,
    /// `ask`: calls no rule allows are put to the RPC client (refused where there is none).
    Ask,
    /// `deny`: calls no rule allows are refused.
    Deny,
}

impl PermissionMode {
    /// Parses `off` / `ask` / `deny`; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "off" => Some(PermissionMode::Off),
            "ask" => Some(PermissionMode::Ask),
            "deny" => Some(PermissionMode::Deny),
            _ => None,
        }
    }

    /// The settings string.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Off => "off",
            PermissionMode::Ask => "ask",
            PermissionMode::Deny => "deny",
        }
    }
}

/// One parsed rule, `tool` or `tool(pattern)`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The rule as written in settings.
    text: String,
    /// The tool name it applies to.
    tool: String,
    /// The argument glob; `None` = every call of the tool.
    pattern: Option<Pattern>,
}

#[derive(Debug, Clone)]
struct Pattern {
    /// The glob source.
    source: String,
    matcher: GlobMatcher,
    /// A path pattern that starts with `/` (matched against the absolute path).
    absolute: bool,
}

impl Rule {
    /// Parses one rule. `Err`: the reason, naming the rule.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let bad = |why: &str| format!("invalid permission rule \"{text}\": {why}");
        let trimmed = text.trim();
        let (tool, pattern) = match trimmed.find('(') {
            None => (trimmed, None),
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err(bad("a pattern must end with \")\""));
                };
                (&trimmed[..open], Some(inner))
            }
        };
        let name_ok = !tool.is_empty()
            && tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !name_ok {
            return Err(bad(
                "expected a tool name, optionally followed by (pattern)",
            ));
        }
        let pattern = match pattern {
            None => None,
            Some("") => return Err(bad("the pattern is empty")),
            Some(p) => {
                let is_path = PATH_TOOLS.contains(&tool);
                if tool != "bash" && !is_path {
                    return Err(bad(&format!(
                        "only bash, {} take a pattern; write \"{tool}\" for every call",
                        PATH_TOOLS.join(", ")
                    )));
                }
                let glob = if is_path {
                    GlobBuilder::new(p).literal_separator(true).build()
                } else {
                    Glob::new(p)
                };
                let glob = glob.map_err(|e| bad(&e.to_string()))?;
                Some(Pattern {
                    source: p.to_string(),
                    matcher: glob.compile_matcher(),
                    absolute: is_path && p.starts_with('/'),
                })
            }
        };
        Ok(Rule {
            text: trimmed.to_string(),
            tool: tool.to_string(),
            pattern,
        })
    }

    /// The rule as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the rule matches `call`; `allow` applies the shell-control restriction.
    fn matches(&self, call: &CallSubject, allow: bool) -> bool {
        if self.tool != call.tool {
            return false;
        }
        let Some(p) = &self.pattern else {
            return true;
        };
        match &call.arg {
            Arg::None => false,
            Arg::Command(cmd) => {
                if allow
                    && (cmd
                        .chars()
                        .any(|c| SHELL_CONTROL.contains(&c) && !p.source.contains(c))
                        || (cmd.contains("$(") && !p.source.contains("$(")))
                {
                    return false;
                }
                p.matcher.is_match(cmd)
            }
            Arg::Path {
                relative,
                absolute,
                real,
            } => {
                let one = |relative: &Option<String>, absolute: &str| match (p.absolute, relative) {
                    (true, _) => p.matcher.is_match(absolute),
                    (false, Some(rel)) => p.matcher.is_match(rel),
                    (false, None) => false,
                };
                let as_given = one(relative, absolute);
                match real {
                    None => as_given,
                    // A symlink (or `/proc/self/cwd`) must neither dodge a deny rule nor
                    // lead an allow rule outside what it names: deny matches either form,
                    // allow needs both.
                    Some(r) if allow => as_given && one(&r.0, &r.1),
                    Some(r) => as_given || one(&r.0, &r.1),
                }
            }
        }
    }
}

/// What a rule is matched against: the tool and its command line or path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallSubject {
    /// The tool name.
    pub tool: String,
    arg: Arg,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Arg {
    /// A tool without a matched argument (or one that lacks it).
    None,
    /// The `bash` command line.
    Command(String),
    /// A path argument: relative to the cwd when inside it (`.` for the cwd itself), and
    /// absolute (lexically normalised); `real` = the same two forms of where the path really
    /// leads, symlinks (`/proc/self/cwd` too) followed, when that differs.
    Path {
        relative: Option<String>,
        absolute: String,
        real: Option<Box<(Option<String>, String)>>,
    },
}

impl CallSubject {
    /// The subject of a call of `tool` with (validated) `args`, for a session in `cwd`.
    pub fn of(tool: &str, args: &Value, cwd: &Path) -> CallSubject {
        let arg = if tool == "bash" {
            match args.get("command").and_then(Value::as_str) {
                Some(c) => Arg::Command(c.to_string()),
                None => Arg::None,
            }
        } else if PATH_TOOLS.contains(&tool) {
            let given = args.get("path").and_then(Value::as_str);
            let given = match given {
                Some(p) => Some(p),
                None if OPTIONAL_PATH_TOOLS.contains(&tool) => Some("."),
                None => None,
            };
            match given {
                Some(p) => path_arg(p, cwd),
                None => Arg::None,
            }
        } else {
            Arg::None
        };
        CallSubject {
            tool: tool.to_string(),
            arg,
        }
    }

    /// `tool(argument)` or `tool`, as shown to the user and the model.
    pub fn display(&self) -> String {
        match &self.arg {
            Arg::None => self.tool.clone(),
            Arg::Command(c) => format!("{}({c})", self.tool),
            Arg::Path {
                relative, absolute, ..
            } => format!("{}({})", self.tool, relative.as_deref().unwrap_or(absolute)),
        }
    }
}

/// The path argument resolved as the tools resolve it (`@`, `~`, relative to `cwd`, `.` and
/// `..` removed), then made relative to `cwd` when inside it.
/// A path that cannot be resolved (a symlink loop) is judged by a `real` form no rule but a
/// bare tool name matches, so deny rules on paths cannot be dodged with one, nor allow rules
/// be met.
fn path_arg(given: &str, cwd: &Path) -> Arg {
    let absolute = crate::tools::util::resolve_to_cwd(given, cwd);
    let roots = [
        crate::tools::util::normalize_lexically(cwd),
        std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf()),
    ];
    let relative_of = |path: &Path| {
        roots.iter().find_map(|root| {
            path.strip_prefix(root).ok().map(|rest| {
                if rest.as_os_str().is_empty() {
                    ".".to_string()
                } else {
                    rest.to_string_lossy().into_owned()
                }
            })
        })
    };
    let relative = relative_of(&absolute);
    let real = match crate::tools::sandbox::resolve_links(&absolute) {
        Some(r) if r == absolute => None,
        Some(r) => Some(Box::new((
            relative_of(&r),
            r.to_string_lossy().into_owned(),
        ))),
        None => Some(Box::new((None, "\u{0}unresolvable".to_string()))),
    };
    Arg::Path {
        relative,
        absolute: absolute.to_string_lossy().into_owned(),
        real,
    }
}

/// What the policy decided for one call, before any asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Refuse it; the text is the reason in parentheses of [`denial`].
    Deny(String),
    /// Ask the client (mode `ask`, no rule matched).
    Ask,
}

/// The error text a refused call's tool result carries: `Permission denied: <subject> is not
/// allowed by the permission policy (<why>)`.
pub fn denial(subject: &CallSubject, why: &str) -> String {
    format!(
        "Permission denied: {} is not allowed by the permission policy ({why})",
        subject.display()
    )
}

/// The effective policy of a process.
#[derive(Debug, Clone, Default)]
pub struct PermissionPolicy {
    /// The mode (settings, overridden by `--permission-mode`).
    pub mode: PermissionMode,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// How long an `ask` waits for the client.
    pub ask_timeout: Duration,
}

impl PermissionPolicy {
    /// The policy of the global and project settings objects (the project one `{}` when the
    /// project is not trusted) and the `--permission-mode` value. `Ok(None)`: nothing to
    /// enforce (mode off and no deny rule), the tools run as without a policy. `Err`: a
    /// message naming the bad key or rule.
    pub fn from_settings(
        global: &Map<String, Value>,
        project: &Map<String, Value>,
        cli_mode: Option<&str>,
    ) -> Result<Option<PermissionPolicy>, String> {
        let g = Section::parse(global.get("permissions"), "settings.json")?;
        let p = Section::parse(project.get("permissions"), ".pi/settings.json")?;
        let mode = match cli_mode {
            Some(m) => PermissionMode::parse(m)
                .ok_or_else(|| format!("invalid --permission-mode \"{m}\""))?,
            None => p.mode.or(g.mode).unwrap_or_default(),
        };
        let mut deny = g.deny.unwrap_or_default();
        deny.extend(p.deny.unwrap_or_default());
        let policy = PermissionPolicy {
            mode,
            allow: p.allow.or(g.allow).unwrap_or_default(),
            deny,
            ask_timeout: Duration::from_millis(
                p.ask_timeout_ms
                    .or(g.ask_timeout_ms)
                    .unwrap_or(DEFAULT_ASK_TIMEOUT_MS),
            ),
        };
        if policy.mode == PermissionMode::Off && policy.deny.is_empty() {
            return Ok(None);
        }
        Ok(Some(policy))
    }

    /// The allow rules, as written.
    pub fn allow_rules(&self) -> impl Iterator<Item = &str> {
        self.allow.iter().map(Rule::text)
    }

    /// The deny rules (global, then project), as written.
    pub fn deny_rules(&self) -> impl Iterator<Item = &str> {
        self.deny.iter().map(Rule::text)
    }

    /// Decides `call`; `session_allows` holds the subjects answered "allow always" in this
    /// session.
    pub fn decide(&self, call: &CallSubject, session_allowed: bool) -> Verdict {
        if let Some(rule) = self.deny.iter().find(|r| r.matches(call, false)) {
            return Verdict::Deny(format!("deny rule {}", rule.text()));
        }
        if session_allowed || self.allow.iter().any(|r| r.matches(call, true)) {
            return Verdict::Allow;
        }
        match self.mode {
            PermissionMode::Off => Verdict::Allow,
            PermissionMode::Deny => Verdict::Deny("mode deny: no allow rule matches".into()),
            PermissionMode::Ask => Verdict::Ask,
        }
    }
}

/// One file's `permissions` object.
#[derive(Default)]
struct Section {
    mode: Option<PermissionMode>,
    allow: Option<Vec<Rule>>,
    deny: Option<Vec<Rule>>,
    ask_timeout_ms: Option<u64>,
}

impl Section {
    fn parse(value: Option<&Value>, file: &str) -> Result<Section, String> {
        let Some(value) = value else {
            return Ok(Section::default());
        };
        let Value::Object(obj) = value else {
            return Err(format!("{file}: \"permissions\" must be an object"));
        };
        let mut s = Section::default();
        for (key, v) in obj {
            let at = |why: &str| format!("{file}: permissions.{key} {why}");
            match key.as_str() {
                "mode" => {
                    let m = v.as_str().and_then(PermissionMode::parse);
                    s.mode = Some(m.ok_or_else(|| at("must be \"off\", \"ask\" or \"deny\""))?);
                }
                "allow" | "deny" => {
                    let Some(list) = v.as_array() else {
                        return Err(at("must be an array of rule strings"));
                    };
                    let mut rules = Vec::with_capacity(list.len());
                    for item in list {
                        let text = item
                            .as_str()
                            .ok_or_else(|| at("must be an array of rule strings"))?;
                        rules.push(Rule::parse(text).map_err(|e| format!("{file}: {e}"))?);
                    }
                    if key == "allow" {
                        s.allow = Some(rules);
                    } else {
                        s.deny = Some(rules);
                    }
                }
                "askTimeoutMs" => {
                    let ms = v.as_u64().filter(|ms| *ms > 0);
                    s.ask_timeout_ms =
                        Some(ms.ok_or_else(|| at("must be a positive whole number of ms"))?);
                }
                _ => {
                    return Err(format!(
                        "{file}: unknown key permissions.{key} (expected mode, allow, deny, askTimeoutMs)"
                    ))
                }
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    /// The cwd-relative path a subject names.
    fn relative_of(s: &CallSubject) -> Option<PathBuf> {
        match &s.arg {
            Arg::Path { relative, .. } => relative.as_ref().map(PathBuf::from),
            _ => None,
        }
    }

    fn policy(v: Value) -> PermissionPolicy {
        let Value::Object(g) = json!({ "permissions": v }) else {
            unreachable!()
        };
        PermissionPolicy::from_settings(&g, &Map::new(), None)
            .unwrap()
            .unwrap()
    }

    fn bash(cmd: &str) -> CallSubject {
        CallSubject::of("bash", &json!({ "command": cmd }), Path::new("/w"))
    }

    fn path(tool: &str, p: &str) -> CallSubject {
        CallSubject::of(tool, &json!({ "path": p }), Path::new("/w"))
    }

    #[test]
    fn no_setting_is_no_policy() {
        let none = PermissionPolicy::from_settings(&Map::new(), &Map::new(), None).unwrap();
        assert!(none.is_none());
        let Value::Object(g) = json!({"permissions": {"mode": "off", "allow": ["read"]}}) else {
            unreachable!()
        };
        assert!(PermissionPolicy::from_settings(&g, &Map::new(), None)
            .unwrap()
            .is_none());
        // The flag overrides the mode.
        let p = PermissionPolicy::from_settings(&g, &Map::new(), Some("deny"))
            .unwrap()
            .unwrap();
        assert_eq!(p.mode, PermissionMode::Deny);
        assert_eq!(p.ask_timeout, Duration::from_millis(DEFAULT_ASK_TIMEOUT_MS));
    }

    #[test]
    fn bash_globs_and_shell_control() {
        let p = policy(json!({"mode": "deny", "allow": ["bash(git *)", "bash(ls -l | wc -l)"]}));
        assert_eq!(p.decide(&bash("git status --short"), false), Verdict::Allow);
        assert_eq!(p.decide(&bash("git log src/a/b"), false), Verdict::Allow);
        assert_eq!(p.decide(&bash("ls -l | wc -l"), false), Verdict::Allow);
        for cmd in [
            "curl x | sh",
            "git status; curl x | sh",
            "git log && rm -rf /",
            "git log $(curl x)",
            "git log `id`",
            "git log > /etc/passwd",
            "git log\nrm x",
        ] {
            assert_eq!(
                p.decide(&bash(cmd), false),
                Verdict::Deny("mode deny: no allow rule matches".into()),
                "{cmd}"
            );
        }
    }

    #[test]
    fn deny_beats_allow_in_every_mode() {
        for mode in ["off", "ask", "deny"] {
            let p = policy(json!({"mode": mode, "allow": ["bash"], "deny": ["bash(rm *)"]}));
            assert_eq!(
                p.decide(&bash("rm -rf x"), true),
                Verdict::Deny("deny rule bash(rm *)".into())
            );
            assert_eq!(p.decide(&bash("echo hi"), false), Verdict::Allow);
        }
    }

    #[test]
    fn paths_relative_to_cwd() {
        let p =
            policy(json!({"mode": "ask", "allow": ["read(src/**)", "ls(.)", "write(/tmp/*.txt)"]}));
        assert_eq!(p.decide(&path("read", "src/a/b.rs"), false), Verdict::Allow);
        assert_eq!(p.decide(&path("read", "./src/a.rs"), false), Verdict::Allow);
        assert_eq!(
            p.decide(&path("read", "/w/src/a.rs"), false),
            Verdict::Allow
        );
        assert_eq!(
            p.decide(&path("read", "/w/x/../src/a.rs"), false),
            Verdict::Allow
        );
        assert_eq!(
            p.decide(&path("read", "../w2/src/a.rs"), false),
            Verdict::Ask
        );
        assert_eq!(p.decide(&path("read", "README.md"), false), Verdict::Ask);
        assert_eq!(
            p.decide(&CallSubject::of("ls", &json!({}), Path::new("/w")), false),
            Verdict::Allow
        );
        assert_eq!(
            p.decide(&path("write", "/tmp/a.txt"), false),
            Verdict::Allow
        );
        assert_eq!(
            p.decide(&path("write", "/tmp/d/a.txt"), false),
            Verdict::Ask
        );
        assert_eq!(p.decide(&path("edit", "src/a.rs"), false), Verdict::Ask);
        assert_eq!(
            relative_of(&path("read", "/w/src/a.rs")),
            Some(PathBuf::from("src/a.rs"))
        );
        assert_eq!(relative_of(&path("read", "/etc/passwd")), None);
    }

    #[test]
    fn outside_cwd_needs_an_absolute_pattern() {
        let p = policy(json!({"mode": "deny", "allow": ["read(**)"]}));
        assert_eq!(p.decide(&path("read", "a/b.rs"), false), Verdict::Allow);
        assert!(matches!(
            p.decide(&path("read", "/etc/passwd"), false),
            Verdict::Deny(_)
        ));
        assert!(matches!(
            p.decide(&path("read", "../x"), false),
            Verdict::Deny(_)
        ));
    }

    /// A symlink or `/proc/self/cwd` neither dodges a deny rule nor takes an allow rule
    /// outside what it names (tester findings: `read alias.txt` → `secret.txt` was served).
    #[test]
    fn symlinks_are_judged_where_they_lead() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(cwd.join("secret.txt"), "x").unwrap();
        std::fs::create_dir(cwd.join("src")).unwrap();
        std::os::unix::fs::symlink("secret.txt", cwd.join("alias.txt")).unwrap();
        std::os::unix::fs::symlink("../secret.txt", cwd.join("src/s.txt")).unwrap();
        let at = |tool: &str, p: &str| CallSubject::of(tool, &json!({ "path": p }), &cwd);
        let p = policy(json!({"mode": "deny", "allow": ["read"], "deny": ["read(secret*)"]}));
        assert!(matches!(
            p.decide(&at("read", "secret.txt"), false),
            Verdict::Deny(_)
        ));
        assert!(matches!(
            p.decide(&at("read", "alias.txt"), false),
            Verdict::Deny(_)
        ));
        // `/proc/self/cwd` (this process's cwd) climbed up to `/` and down to the secret.
        let ups = std::env::current_dir().unwrap().components().count() - 1;
        let via_proc = format!(
            "/proc/self/cwd/{}{}",
            "../".repeat(ups),
            cwd.join("secret.txt")
                .display()
                .to_string()
                .trim_start_matches('/')
        );
        assert!(
            matches!(p.decide(&at("read", &via_proc), false), Verdict::Deny(_)),
            "{via_proc}"
        );
        let p = policy(json!({"mode": "deny", "allow": ["read(src/**)"]}));
        assert_eq!(p.decide(&at("read", "src/a.rs"), false), Verdict::Allow);
        assert!(matches!(
            p.decide(&at("read", "src/s.txt"), false),
            Verdict::Deny(_)
        ));
    }

    #[test]
    fn bare_names_match_every_call() {
        let p = policy(json!({"mode": "deny", "allow": ["mcp__srv__tool"], "deny": ["write"]}));
        let mcp = CallSubject::of("mcp__srv__tool", &json!({"q": 1}), Path::new("/w"));
        assert_eq!(mcp.display(), "mcp__srv__tool");
        assert_eq!(p.decide(&mcp, false), Verdict::Allow);
        assert_eq!(
            p.decide(&path("write", "a"), false),
            Verdict::Deny("deny rule write".into())
        );
        let other = CallSubject::of("mcp__srv__other", &json!({}), Path::new("/w"));
        assert!(matches!(p.decide(&other, false), Verdict::Deny(_)));
        assert_eq!(p.decide(&other, true), Verdict::Allow);
    }

    #[test]
    fn project_scope_merges() {
        let Value::Object(g) = json!({"permissions": {"mode": "deny", "allow": ["read"], "deny": ["bash(rm *)"], "askTimeoutMs": 5}})
        else {
            unreachable!()
        };
        let Value::Object(pr) =
            json!({"permissions": {"mode": "ask", "allow": ["ls"], "deny": ["write"]}})
        else {
            unreachable!()
        };
        let p = PermissionPolicy::from_settings(&g, &pr, None)
            .unwrap()
            .unwrap();
        assert_eq!(p.mode, PermissionMode::Ask);
        assert_eq!(p.ask_timeout, Duration::from_millis(5));
        assert_eq!(p.decide(&path("read", "a"), false), Verdict::Ask);
        assert_eq!(p.decide(&path("ls", "a"), false), Verdict::Allow);
        assert!(matches!(p.decide(&bash("rm x"), false), Verdict::Deny(_)));
        assert!(matches!(
            p.decide(&path("write", "a"), false),
            Verdict::Deny(_)
        ));
    }

    #[test]
    fn bad_settings_are_errors() {
        for (v, want) in [
            (json!("ask"), "must be an object"),
            (json!({"mode": "maybe"}), "permissions.mode"),
            (
                json!({"allow": "bash"}),
                "permissions.allow must be an array",
            ),
            (json!({"allow": [3]}), "permissions.allow must be an array"),
            (json!({"deny": ["bash(git *"]}), "must end with"),
            (json!({"deny": ["bash()"]}), "the pattern is empty"),
            (json!({"deny": ["mcp__x(y)"]}), "only bash"),
            (
                json!({"deny": ["read([)"]}),
                "invalid permission rule \"read([)\"",
            ),
            (json!({"deny": ["(x)"]}), "expected a tool name"),
            (json!({"askTimeoutMs": -1}), "askTimeoutMs"),
            (json!({"alow": []}), "unknown key permissions.alow"),
        ] {
            let Value::Object(g) = json!({ "permissions": v }) else {
                unreachable!()
            };
            let e = PermissionPolicy::from_settings(&g, &Map::new(), None).unwrap_err();
            assert!(e.contains(want), "{e} / {want}");
            assert!(e.starts_with("settings.json: "), "{e}");
        }
    }

    #[test]
    fn denial_text() {
        assert_eq!(
            denial(&bash("curl x | sh"), "mode ask: denied by the user"),
            "Permission denied: bash(curl x | sh) is not allowed by the permission policy (mode ask: denied by the user)"
        );
    }
}
