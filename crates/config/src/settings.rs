//! `settings.json`: global (`<agent>/settings.json`) and project (`<cwd>/.pi/settings.json`)
//! files, deep-merged with the project winning (spec config.md §3; upstream
//! `core/settings-manager.ts`).
//!
//! * Missing file = `{}`. A file that cannot be read or parsed (or whose top level is not an
//!   object) counts as `{}`, a warning goes to stderr, and that file is never written.
//! * Merge: for every key of the project object, when both values are objects they merge
//!   recursively, otherwise the project value replaces the global one (arrays replace).
//! * Load-time migrations: `queueMode` → `steeringMode`; `websockets: bool` → `transport`;
//!   `skills: {enableSkillCommands, customDirectories}` → `enableSkillCommands` + `skills`.
//! * Writes ([`Settings::set_global`]) merge only the changed key into the global file's current
//!   content and write it pretty-printed with two spaces and no trailing newline (what upstream
//!   1.6 leaves behind, e.g. golden `queue_modes_and_toggles`).

use super::{read_json_file, warn, JsonFile};
use pi_ai::ThinkingLevel;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// `steeringMode` / `followUpMode` values (spec config.md §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMode {
    /// `"all"`: deliver every queued message at once.
    All,
    /// `"one-at-a-time"` (default).
    #[default]
    OneAtATime,
}

impl QueueMode {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::All => "all",
            QueueMode::OneAtATime => "one-at-a-time",
        }
    }
    /// Parses a wire string; unknown strings give `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "all" => Some(QueueMode::All),
            "one-at-a-time" => Some(QueueMode::OneAtATime),
            _ => None,
        }
    }
}

/// `retry.*` (spec agent-loop.md §6; names and defaults as upstream 1.6 docs/settings.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    /// `retry.enabled` (default true): agent-level automatic retry.
    pub enabled: bool,
    /// `retry.maxRetries` (default 3): agent-level retry attempts per error chain.
    pub max_retries: u64,
    /// `retry.baseDelayMs` (default 2000); attempt n waits `base · 2^(n−1)` ms.
    pub base_delay_ms: u64,
    /// `retry.maxAgentDelayMs` (default 60000): the longest agent-level back-off in ms; also
    /// the longest server-requested (`Retry-After`) delay the agent waits before giving up.
    pub max_agent_delay_ms: u64,
    /// `retry.provider.timeoutMs`: the longest wait for response headers in ms; `None` = the
    /// `httpIdleTimeoutMs` value.
    pub provider_timeout_ms: Option<u64>,
    /// `retry.provider.maxRetries` (default 0): provider-level retries of one request.
    pub provider_max_retries: u64,
    /// `retry.provider.maxRetryDelayMs` (default 60000; 0 = no limit): the longest
    /// server-requested delay a provider-level retry waits.
    pub provider_max_retry_delay_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            enabled: true,
            max_retries: 3,
            base_delay_ms: 2000,
            max_agent_delay_ms: 60_000,
            provider_timeout_ms: None,
            provider_max_retries: 0,
            provider_max_retry_delay_ms: 60_000,
        }
    }
}

/// `compaction.*` (spec config.md §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    /// `compaction.enabled` (default true): auto-compaction and overflow recovery.
    pub enabled: bool,
    /// `compaction.reserveTokens` (default 16384).
    pub reserve_tokens: u64,
    /// `compaction.keepRecentTokens` (default 20000).
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            enabled: true,
            reserve_tokens: 16_384,
            keep_recent_tokens: 20_000,
        }
    }
}

/// The effective settings of one process: both scopes, their merge, and where they live.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    global_path: Option<PathBuf>,
    project_path: Option<PathBuf>,
    global: Map<String, Value>,
    project: Map<String, Value>,
    merged: Map<String, Value>,
    global_writable: bool,
    errors: Vec<String>,
}

impl Settings {
    /// Loads `<agent_dir>/settings.json` and `<cwd>/.pi/settings.json`. Problems are warned
    /// about on stderr and recorded in [`Settings::errors`].
    pub fn load(agent_dir: &Path, cwd: &Path) -> Self {
        Settings::load_with_trust(agent_dir, cwd, true)
    }

    /// [`Settings::load`], reading the project file only when `project_trusted` (project trust,
    /// upstream `docs/security.md`); an untrusted project scope is `{}`.
    pub fn load_with_trust(agent_dir: &Path, cwd: &Path, project_trusted: bool) -> Self {
        let global_path = agent_dir.join("settings.json");
        let project_path = cwd.join(".pi").join("settings.json");
        let mut errors = Vec::new();
        let (global, global_ok) = load_scope(&global_path, &mut errors);
        let project = if project_trusted {
            load_scope(&project_path, &mut errors).0
        } else {
            Map::new()
        };
        for e in &errors {
            warn(e);
        }
        let mut s = Settings::from_maps(global, project);
        s.global_path = Some(global_path);
        s.project_path = Some(project_path);
        s.global_writable = global_ok;
        s.errors = errors;
        s
    }

    /// In-memory settings from two JSON objects (non-objects count as `{}`); nothing is ever
    /// written.
    pub fn from_values(global: Value, project: Value) -> Self {
        let as_map = |v: Value| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Settings::from_maps(as_map(global), as_map(project))
    }

    fn from_maps(mut global: Map<String, Value>, mut project: Map<String, Value>) -> Self {
        migrate(&mut global);
        migrate(&mut project);
        let merged = deep_merge(&global, &project);
        Settings {
            global,
            project,
            merged,
            ..Default::default()
        }
    }

    /// The merged settings object (raw JSON, after migrations).
    pub fn raw(&self) -> &Map<String, Value> {
        &self.merged
    }

    /// The global scope as loaded (after migrations and later [`Settings::set_global`] calls).
    pub fn global(&self) -> &Map<String, Value> {
        &self.global
    }

    /// The project scope as loaded (after migrations).
    pub fn project(&self) -> &Map<String, Value> {
        &self.project
    }

    /// Warnings produced while loading (unreadable file, bad JSON, non-object top level).
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// A top-level merged value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.merged.get(key)
    }

    /// A nested merged value, e.g. `["compaction", "enabled"]`.
    pub fn get_path(&self, path: &[&str]) -> Option<&Value> {
        let (first, rest) = path.split_first()?;
        let mut cur = self.merged.get(*first)?;
        for key in rest {
            cur = cur.as_object()?.get(*key)?;
        }
        Some(cur)
    }

    fn str_at(&self, path: &[&str]) -> Option<&str> {
        self.get_path(path).and_then(Value::as_str)
    }

    fn bool_at(&self, path: &[&str], default: bool) -> bool {
        self.get_path(path)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    }

    fn u64_at(&self, path: &[&str], default: u64) -> u64 {
        self.get_path(path).and_then(as_u64).unwrap_or(default)
    }

    fn strings_at(&self, key: &str) -> Vec<String> {
        self.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `defaultProvider`.
    pub fn default_provider(&self) -> Option<&str> {
        self.str_at(&["defaultProvider"])
    }

    /// `defaultModel` (a model id).
    pub fn default_model(&self) -> Option<&str> {
        self.str_at(&["defaultModel"])
    }

    /// `defaultThinkingLevel`, when set to a known level (otherwise ignored).
    pub fn default_thinking_level(&self) -> Option<ThinkingLevel> {
        self.str_at(&["defaultThinkingLevel"])
            .and_then(ThinkingLevel::parse)
    }

    /// `steeringMode` (unknown values fall back to the default `one-at-a-time`; the raw string
    /// stays available through [`Settings::get`]).
    pub fn steering_mode(&self) -> QueueMode {
        self.str_at(&["steeringMode"])
            .and_then(QueueMode::parse)
            .unwrap_or_default()
    }

    /// `followUpMode` (same rules as [`Settings::steering_mode`]).
    pub fn follow_up_mode(&self) -> QueueMode {
        self.str_at(&["followUpMode"])
            .and_then(QueueMode::parse)
            .unwrap_or_default()
    }

    /// `retry.*` with defaults.
    pub fn retry(&self) -> RetrySettings {
        let d = RetrySettings::default();
        RetrySettings {
            enabled: self.bool_at(&["retry", "enabled"], d.enabled),
            max_retries: self.u64_at(&["retry", "maxRetries"], d.max_retries),
            base_delay_ms: self.u64_at(&["retry", "baseDelayMs"], d.base_delay_ms),
            max_agent_delay_ms: self.u64_at(&["retry", "maxAgentDelayMs"], d.max_agent_delay_ms),
            provider_timeout_ms: self
                .get_path(&["retry", "provider", "timeoutMs"])
                .and_then(as_u64),
            provider_max_retries: self
                .u64_at(&["retry", "provider", "maxRetries"], d.provider_max_retries),
            provider_max_retry_delay_ms: self.u64_at(
                &["retry", "provider", "maxRetryDelayMs"],
                d.provider_max_retry_delay_ms,
            ),
        }
    }

    /// `compaction.*` with defaults.
    pub fn compaction(&self) -> CompactionSettings {
        let d = CompactionSettings::default();
        CompactionSettings {
            enabled: self.bool_at(&["compaction", "enabled"], d.enabled),
            reserve_tokens: self.u64_at(&["compaction", "reserveTokens"], d.reserve_tokens),
            keep_recent_tokens: self
                .u64_at(&["compaction", "keepRecentTokens"], d.keep_recent_tokens),
        }
    }

    /// `branchSummary.reserveTokens` (default 16384).
    pub fn branch_summary_reserve_tokens(&self) -> u64 {
        self.u64_at(&["branchSummary", "reserveTokens"], 16_384)
    }

    /// `shellPath`: the shell the bash tools run.
    pub fn shell_path(&self) -> Option<&str> {
        self.str_at(&["shellPath"])
    }

    /// `shellCommandPrefix`: prepended (`prefix\ncommand`) to every bash command.
    pub fn shell_command_prefix(&self) -> Option<&str> {
        self.str_at(&["shellCommandPrefix"])
    }

    /// `transport` (`sse`, `websocket`, `auto`, …) when set.
    pub fn transport(&self) -> Option<&str> {
        self.str_at(&["transport"])
    }

    /// `enabledModels`: default `--models` patterns.
    pub fn enabled_models(&self) -> Option<Vec<String>> {
        self.get("enabledModels")
            .and_then(Value::as_array)
            .map(|_| self.strings_at("enabledModels"))
    }

    /// `thinkingBudgets` (`{minimal?, low?, medium?, high?}` token budgets), raw.
    pub fn thinking_budgets(&self) -> Option<&Map<String, Value>> {
        self.get("thinkingBudgets").and_then(Value::as_object)
    }

    /// `thinkingBudgets` as the providers take them (pi-ai `ThinkingBudgets`, tokens per
    /// level); entries that are not non-negative numbers are ignored; `None` when unset.
    pub fn provider_thinking_budgets(&self) -> Option<pi_ai::ThinkingBudgets> {
        let raw = self.thinking_budgets()?;
        let get = |k: &str| raw.get(k).and_then(as_u64);
        Some(pi_ai::ThinkingBudgets {
            minimal: get("minimal"),
            low: get("low"),
            medium: get("medium"),
            high: get("high"),
        })
    }

    /// `images.autoResize` (default true).
    pub fn images_auto_resize(&self) -> bool {
        self.bool_at(&["images", "autoResize"], true)
    }

    /// `images.blockImages` (default false).
    pub fn images_block_images(&self) -> bool {
        self.bool_at(&["images", "blockImages"], false)
    }

    /// `enableSkillCommands` (default true).
    pub fn enable_skill_commands(&self) -> bool {
        self.bool_at(&["enableSkillCommands"], true)
    }

    /// `sessionDir` (newer key).
    pub fn session_dir(&self) -> Option<&str> {
        self.str_at(&["sessionDir"])
    }

    /// `httpIdleTimeoutMs`: the idle timeout of provider HTTP requests in ms — the longest wait
    /// for response headers or for the next body chunk (default 300000; `0` = disabled).
    /// As upstream 1.6 (`parseHttpIdleTimeoutMs`): a non-negative number (floored), a numeric
    /// string, or `"disabled"` (= 0); anything else (negative, other strings) uses the default
    /// (upstream rejects those with an error).
    pub fn http_idle_timeout_ms(&self) -> u64 {
        const DEFAULT: u64 = pi_ai::providers::DEFAULT_HTTP_IDLE_TIMEOUT_MS;
        match self.get_path(&["httpIdleTimeoutMs"]) {
            Some(Value::String(s)) => {
                let s = s.trim();
                if s.eq_ignore_ascii_case("disabled") {
                    0
                } else {
                    s.parse::<f64>()
                        .ok()
                        .and_then(|f| as_u64(&Value::from(f)))
                        .unwrap_or(DEFAULT)
                }
            }
            Some(v) => as_u64(v).unwrap_or(DEFAULT),
            None => DEFAULT,
        }
    }

    /// The resolved `defaultTools` selection, or `None` when no scope sets it. A project list of
    /// only `+name`/`-name` entries edits the global list instead of replacing it (upstream
    /// `docs/settings.md` "defaultTools"); see [`pi_tools::select::resolve_default_tools`].
    pub fn default_tools(&self) -> Option<Vec<String>> {
        let strings = |v: &Value| -> Option<Vec<String>> {
            v.as_array().map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
        };
        let global = self.global.get("defaultTools");
        let project = self.project.get("defaultTools");
        let all_edits = |v: &Value| {
            v.as_array().is_some_and(|a| {
                a.iter()
                    .all(|e| e.as_str().is_some_and(pi_platform::cli::is_tool_modifier))
            })
        };
        let merged: Vec<String> = match (global, project) {
            (None, None) => return None,
            (Some(g), None) => strings(g).unwrap_or_default(),
            (Some(g), Some(p)) if g.is_array() && all_edits(p) => {
                let mut list = strings(g).unwrap_or_default();
                list.extend(strings(p).unwrap_or_default());
                list
            }
            (_, Some(p)) => strings(p).unwrap_or_default(),
        };
        Some(pi_tools::select::resolve_default_tools(&merged))
    }

    /// `defaultProjectTrust` from the GLOBAL settings only (a project cannot trust itself):
    /// `"ask"` (default), `"always"` or `"never"`; other values count as `"ask"`.
    pub fn default_project_trust(&self) -> &str {
        match self
            .global
            .get("defaultProjectTrust")
            .and_then(Value::as_str)
        {
            Some(v @ ("always" | "never")) => v,
            _ => "ask",
        }
    }

    /// `httpProxy` from the GLOBAL settings (upstream applies only the global value), if a
    /// non-empty string.
    pub fn http_proxy(&self) -> Option<&str> {
        self.global
            .get("httpProxy")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// `modelThinkingLevels`: `"provider/id"` (exact) → the thinking level to start with, or
    /// switch to, on that model (upstream 1.6 `docs/settings.md`), as a raw object.
    pub fn model_thinking_levels(&self) -> Option<&Map<String, Value>> {
        self.get("modelThinkingLevels").and_then(Value::as_object)
    }

    /// `quietStartup` (default false).
    pub fn quiet_startup(&self) -> bool {
        self.bool_at(&["quietStartup"], false)
    }

    /// Extra resource paths: `extensions`, `skills`, `prompts` or `themes` (string arrays).
    pub fn resource_paths(&self, key: &str) -> Vec<String> {
        self.strings_at(key)
    }

    /// Sets a (possibly nested) key in the GLOBAL scope and writes it to the global file:
    /// the file's current content is re-read, only this key is changed, and the result is
    /// written pretty-printed (2 spaces, no trailing newline). Nothing is written when the
    /// settings are in-memory or the global file failed to load. The merged view is updated
    /// either way (a project value for the same key still wins, as upstream).
    pub fn set_global(&mut self, path: &[&str], value: Value) -> std::io::Result<()> {
        if path.is_empty() {
            return Ok(());
        }
        set_path(&mut self.global, path, value.clone());
        self.merged = deep_merge(&self.global, &self.project);
        let Some(file) = self.global_path.clone().filter(|_| self.global_writable) else {
            return Ok(());
        };
        let mut current = match read_json_file(&file) {
            JsonFile::Parsed(Value::Object(m)) => m,
            JsonFile::Missing => Map::new(),
            // Someone broke the file meanwhile: leave it alone.
            _ => return Ok(()),
        };
        set_path(&mut current, path, value);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text =
            serde_json::to_string_pretty(&Value::Object(current)).map_err(std::io::Error::other)?;
        std::fs::write(&file, text)
    }
}

fn load_scope(path: &Path, errors: &mut Vec<String>) -> (Map<String, Value>, bool) {
    match read_json_file(path) {
        JsonFile::Missing => (Map::new(), true),
        JsonFile::Parsed(Value::Object(m)) => (m, true),
        JsonFile::Parsed(_) => {
            errors.push(format!(
                "Ignoring {}: the top level is not a JSON object",
                path.display()
            ));
            (Map::new(), false)
        }
        JsonFile::Invalid(e) => {
            errors.push(format!("Could not read {}: {e}", path.display()));
            (Map::new(), false)
        }
    }
}

fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .map(|f| f as u64)
    })
}

fn set_path(map: &mut Map<String, Value>, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = map;
    for key in parents {
        let slot = cur
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(next) = slot else { return };
        cur = next;
    }
    cur.insert(last.to_string(), value);
}

/// Deep merge: keys of `over` win; when both sides hold objects they merge recursively;
/// arrays and scalars replace (upstream `deepMergeSettings`). Key order: `base`'s keys first,
/// then keys only in `over`.
pub fn deep_merge(base: &Map<String, Value>, over: &Map<String, Value>) -> Map<String, Value> {
    let mut out = base.clone();
    for (k, v) in over {
        let merged = match (out.get(k), v) {
            (Some(Value::Object(b)), Value::Object(o)) => Value::Object(deep_merge(b, o)),
            _ => v.clone(),
        };
        out.insert(k.clone(), merged);
    }
    out
}

/// Upstream's load-time migrations of legacy keys (spec config.md §3.1).
fn migrate(m: &mut Map<String, Value>) {
    if let Some(q) = m.remove("queueMode") {
        m.entry("steeringMode").or_insert(q);
    }
    if let Some(ws) = m.get("websockets").and_then(Value::as_bool) {
        m.remove("websockets");
        m.entry("transport")
            .or_insert_with(|| Value::from(if ws { "websocket" } else { "sse" }));
    }
    if let Some(Value::Object(skills)) = m.get("skills").cloned() {
        m.remove("skills");
        if let Some(e) = skills.get("enableSkillCommands") {
            m.entry("enableSkillCommands").or_insert(e.clone());
        }
        if let Some(dirs) = skills.get("customDirectories").and_then(Value::as_array) {
            m.insert("skills".into(), Value::Array(dirs.clone()));
        }
    }
}
