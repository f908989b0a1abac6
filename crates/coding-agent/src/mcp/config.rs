//! `mcp.json`: the `mcpServers` configuration shared with Claude Code, Cursor and other MCP
//! clients (upstream 1.6 `docs/mcp.md` "Configure servers", "Configuration rules").
//!
//! * `<agent dir>/mcp.json` is always read; `<cwd>/.pi/mcp.json` only for a trusted project.
//! * A project entry replaces a user-level entry of the same name. A project entry without
//!   `command`, `url` and `type` is an *override*: it may set only `enabled`, `exposure` and
//!   `toolExposure` of the user-level server and keeps the rest (env, headers, …).
//! * Names are `[A-Za-z0-9_-]+`; two names that differ only in `-`/`_` are one namespace, so the
//!   second is rejected.
//! * `command` selects stdio, `url` streamable HTTP; `type` is optional and must be `stdio`,
//!   `http` or `streamable-http`; `sse` is rejected.
//! * Invalid entries are reported (one message each) and skipped; the others still connect.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Per-request time limit when an entry gives no `timeout` (docs/mcp.md: 60 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How a server's tools reach the model (docs/mcp.md "Control tool exposure").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Upstream's default: callable from `codemode` scripts only. This build has no codemode
    /// tool yet, so such tools are not reachable by the model (see README).
    Codemode,
    /// Declared once `tool_search` loads them (not yet in this build).
    Deferred,
    /// Declared to the model like a built-in tool.
    Direct,
    /// Registered but unreachable.
    Hidden,
}

impl Exposure {
    /// Parses a config value; `codemode-deferred` is upstream's alias of `codemode`.
    pub fn parse(s: &str) -> Option<Exposure> {
        match s {
            "codemode" | "codemode-deferred" => Some(Exposure::Codemode),
            "deferred" => Some(Exposure::Deferred),
            "direct" => Some(Exposure::Direct),
            "hidden" => Some(Exposure::Hidden),
            _ => None,
        }
    }

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::Codemode => "codemode",
            Exposure::Deferred => "deferred",
            Exposure::Direct => "direct",
            Exposure::Hidden => "hidden",
        }
    }
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio {
        /// One executable (not a shell string); a leading `~/` names the home directory.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment, values as written (`${VAR}` / `!command` resolved at connect).
        env: BTreeMap<String, String>,
        /// Working directory; relative values resolve against the session cwd.
        cwd: Option<String>,
    },
    /// Streamable HTTP.
    Http {
        /// `http:` or `https:` URL.
        url: String,
        /// Extra request headers, values as written (resolved at connect).
        headers: BTreeMap<String, String>,
    },
}

/// One valid `mcpServers` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The key in `mcpServers`.
    pub name: String,
    /// stdio or HTTP.
    pub transport: Transport,
    /// `enabled` (default true).
    pub enabled: bool,
    /// `description`.
    pub description: Option<String>,
    /// `timeout` (seconds in the file; default [`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
    /// `exposure` (default [`Exposure::Codemode`], as upstream).
    pub exposure: Exposure,
    /// `toolExposure`, in file order: exact tool names or `*` patterns.
    pub tool_exposure: Vec<(String, Exposure)>,
    /// The file that defines the entry.
    pub source: PathBuf,
    /// `"global"` or `"project"`.
    pub scope: &'static str,
    /// The project file that overrides `enabled`/`exposure`/`toolExposure`, if any.
    pub override_source: Option<PathBuf>,
    /// `oauth` of an HTTP entry, as written (read by [`super::oauth::OAuthSettings`]).
    pub oauth: Option<Value>,
}

impl ServerConfig {
    /// The effective exposure of one server tool: its exact `toolExposure` entry, else the
    /// first matching pattern, else the server's `exposure` (upstream `getMcpToolExposure`).
    pub fn tool_exposure(&self, tool: &str) -> Exposure {
        if let Some((_, e)) = self.tool_exposure.iter().find(|(k, _)| k == tool) {
            return *e;
        }
        self.tool_exposure
            .iter()
            .find(|(k, _)| k.contains('*') && glob_match(k, tool))
            .map(|(_, e)| *e)
            .unwrap_or(self.exposure)
    }

    /// `command args…` or the URL, as `pi mcp list` prints it.
    pub fn describe_transport(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => {
                let mut parts = vec![command.clone()];
                parts.extend(args.iter().cloned());
                parts.join(" ")
            }
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

/// `*` matches any run of characters; everything else is literal.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else if let Some(pos) = rest.find(part) {
            rest = &rest[pos + part.len()..];
        } else {
            return false;
        }
    }
    true
}

/// Every configured server (disabled ones included) and the configuration errors.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    /// Valid entries, in file order (user-level first, project entries replacing in place).
    pub servers: Vec<ServerConfig>,
    /// One message per invalid file or entry, `<path>: <reason>`.
    pub errors: Vec<String>,
}

/// The namespace a server's tools share (`-` → `_`), upstream `mcpNamespace`.
pub fn namespace(server: &str) -> String {
    format!("mcp__{}", server.replace('-', "_"))
}

/// Reads `<agent_dir>/mcp.json` and, when `project_trusted`, `<cwd>/.pi/mcp.json`.
pub fn load(agent_dir: &Path, cwd: &Path, project_trusted: bool) -> McpConfig {
    let mut cfg = McpConfig::default();
    read_file(&agent_dir.join("mcp.json"), "global", &mut cfg);
    if project_trusted {
        read_file(&project_path(cwd), "project", &mut cfg);
    }
    cfg
}

/// `<cwd>/.pi/mcp.json`.
pub fn project_path(cwd: &Path) -> PathBuf {
    cwd.join(".pi").join("mcp.json")
}

const OVERRIDE_KEYS: [&str; 3] = ["enabled", "exposure", "toolExposure"];

fn read_file(path: &Path, scope: &'static str, cfg: &mut McpConfig) {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            cfg.errors.push(format!("{}: {e}", path.display()));
            return;
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let parsed: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            cfg.errors.push(format!("{}: {e}", path.display()));
            return;
        }
    };
    let servers = match parsed.as_object() {
        Some(o) => match o.get("mcpServers") {
            None => return,
            Some(Value::Object(s)) => s.clone(),
            Some(_) => {
                cfg.errors.push(format!(
                    "{}: expected an object with an \"mcpServers\" object",
                    path.display()
                ));
                return;
            }
        },
        None => {
            cfg.errors.push(format!(
                "{}: expected an object with an \"mcpServers\" object",
                path.display()
            ));
            return;
        }
    };
    for (name, value) in servers {
        let is_override = value.as_object().is_some_and(|o| {
            !o.contains_key("command") && !o.contains_key("url") && !o.contains_key("type")
        });
        if scope == "project" && is_override {
            let obj = value.as_object().cloned().unwrap_or_default();
            let Some(idx) = cfg.servers.iter().position(|s| s.name == name) else {
                cfg.errors.push(format!(
                    "{}: server \"{name}\" needs \"command\" or \"url\", or a global server to override",
                    path.display()
                ));
                continue;
            };
            if obj.keys().any(|k| !OVERRIDE_KEYS.contains(&k.as_str())) {
                cfg.errors.push(format!(
                    "{}: server \"{name}\": an override can only set enabled, exposure, toolExposure",
                    path.display()
                ));
                continue;
            }
            let base = &cfg.servers[idx];
            match apply_override(base, &obj) {
                Ok(mut s) => {
                    s.override_source = Some(path.to_path_buf());
                    cfg.servers[idx] = s;
                }
                Err(e) => cfg
                    .errors
                    .push(format!("{}: server \"{name}\": {e}", path.display())),
            }
            continue;
        }
        let server = match validate(&name, &value, path, scope) {
            Ok(s) => s,
            Err(e) => {
                cfg.errors.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let ns = namespace(&name);
        if let Some(clash) = cfg
            .servers
            .iter()
            .find(|o| o.name != name && namespace(&o.name) == ns)
        {
            cfg.errors.push(format!(
                "{}: server \"{name}\" conflicts with \"{}\"",
                path.display(),
                clash.name
            ));
            continue;
        }
        match cfg.servers.iter().position(|s| s.name == name) {
            Some(i) => cfg.servers[i] = server,
            None => cfg.servers.push(server),
        }
    }
}

fn apply_override(base: &ServerConfig, obj: &Map<String, Value>) -> Result<ServerConfig, String> {
    let mut s = base.clone();
    if let Some(v) = obj.get("enabled") {
        s.enabled = v.as_bool().ok_or("enabled must be a boolean")?;
    }
    if let Some(v) = obj.get("exposure") {
        s.exposure = parse_exposure(v).ok_or_else(exposure_error)?;
    }
    if let Some(v) = obj.get("toolExposure") {
        s.tool_exposure = parse_tool_exposure(v)?;
    }
    Ok(s)
}

fn exposure_error() -> String {
    "exposure must be one of \"codemode\", \"deferred\", \"direct\", \"hidden\"".into()
}

fn parse_exposure(v: &Value) -> Option<Exposure> {
    v.as_str().and_then(Exposure::parse)
}

fn parse_tool_exposure(v: &Value) -> Result<Vec<(String, Exposure)>, String> {
    let obj = v
        .as_object()
        .ok_or("toolExposure must map tool names to exposures")?;
    obj.iter()
        .map(|(k, v)| {
            parse_exposure(v).map(|e| (k.clone(), e)).ok_or_else(|| {
                format!(
                    "toolExposure \"{k}\" must be one of \"codemode\", \"deferred\", \"direct\", \"hidden\""
                )
            })
        })
        .collect()
}

fn string_map(v: Option<&Value>, what: &str) -> Result<BTreeMap<String, String>, String> {
    let Some(v) = v else {
        return Ok(BTreeMap::new());
    };
    let obj = v
        .as_object()
        .ok_or_else(|| format!("{what} must map names to strings"))?;
    obj.iter()
        .map(|(k, v)| {
            v.as_str()
                .map(|s| (k.clone(), s.to_string()))
                .ok_or_else(|| format!("{what} must map names to strings"))
        })
        .collect()
}

/// Checks one `mcpServers` entry (upstream `validateMcpServerConfig`); the error text is the
/// message after `<path>: `.
pub fn validate(
    name: &str,
    raw: &Value,
    source: &Path,
    scope: &'static str,
) -> Result<ServerConfig, String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "invalid server name \"{name}\" (use letters, digits, \"_\" and \"-\")"
        ));
    }
    let obj = raw
        .as_object()
        .ok_or_else(|| format!("server \"{name}\" must be an object"))?;
    let fail = |e: String| format!("server \"{name}\": {e}");
    let enabled = match obj.get("enabled") {
        None => true,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| fail("enabled must be a boolean".into()))?,
    };
    let description = match obj.get("description") {
        None => None,
        Some(v) => Some(
            v.as_str()
                .ok_or_else(|| fail("description must be a string".into()))?
                .to_string(),
        ),
    };
    let timeout = match obj.get("timeout") {
        None => DEFAULT_TIMEOUT,
        Some(v) => match v.as_f64() {
            Some(t) if t > 0.0 && t.is_finite() => Duration::from_secs_f64(t.min(1e9)),
            _ => return Err(fail("timeout must be a positive number of seconds".into())),
        },
    };
    let exposure = match obj.get("exposure") {
        None => Exposure::Codemode,
        Some(v) => parse_exposure(v).ok_or_else(|| fail(exposure_error()))?,
    };
    let tool_exposure = match obj.get("toolExposure") {
        None => Vec::new(),
        Some(v) => parse_tool_exposure(v).map_err(fail)?,
    };
    let ty = obj.get("type").and_then(Value::as_str);
    if ty == Some("sse") {
        return Err(fail(
            "legacy SSE transport is not supported; use the streamable HTTP URL".into(),
        ));
    }
    let url = obj.get("url").and_then(Value::as_str);
    let command = obj.get("command").and_then(Value::as_str);
    let transport = if let (Some(url), None | Some("http") | Some("streamable-http")) = (url, ty) {
        let ok = (url.starts_with("http://") || url.starts_with("https://"))
            && url.split("://").nth(1).is_some_and(|h| !h.is_empty());
        if !ok {
            return Err(fail("url must be an http or https URL".into()));
        }
        Transport::Http {
            url: url.to_string(),
            headers: string_map(obj.get("headers"), "headers").map_err(fail)?,
        }
    } else if let (Some(command), None | Some("stdio")) = (command, ty) {
        let args = match obj.get("args") {
            None => Vec::new(),
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(_) => return Err(fail("args must be an array of strings".into())),
        };
        let cwd = match obj.get("cwd") {
            None => None,
            Some(v) => Some(
                v.as_str()
                    .ok_or_else(|| fail("cwd must be a string".into()))?
                    .to_string(),
            ),
        };
        Transport::Stdio {
            command: command.to_string(),
            args,
            env: string_map(obj.get("env"), "env").map_err(fail)?,
            cwd,
        }
    } else {
        return Err(format!(
            "server \"{name}\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
        ));
    };
    Ok(ServerConfig {
        name: name.to_string(),
        transport,
        enabled,
        description,
        timeout,
        exposure,
        tool_exposure,
        source: source.to_path_buf(),
        scope,
        override_source: None,
        oauth: obj.get("oauth").filter(|v| v.is_object()).cloned(),
    })
}

/// Resolves an `env`/`headers` value: `!command` (the whole value) runs it, anything else is a
/// `${VAR}` template (config/value.rs rules). `None` = no value (unset variable, failed command).
pub fn resolve_value(raw: &str) -> Option<String> {
    crate::config::resolve_config_value_uncached(raw)
}

/// A leading `~/` → the home directory.
pub fn expand_home(s: &str) -> String {
    match (s.strip_prefix("~/"), crate::config::home_dir()) {
        (Some(rest), Some(home)) => home.join(rest).to_string_lossy().into_owned(),
        _ => s.to_string(),
    }
}
