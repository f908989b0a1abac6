//! `pi auth …` (upstream 1.6 `cli/auth-command.ts`, `auth-check.ts`, `credential-print.ts`,
//! `auth-logout.ts`, `auth-login.ts`): credentials for CI scripts and external clients.
//!
//! - `pi auth check --provider <p> | --model <m> [--json] [--credentials] [--no-refresh]`:
//!   prints `ready`, `not_ready` or `invalid` (or, with `--json`,
//!   `{"status","provider","authType"|"reason"[,"credentials"]}`); exit 0, 1 or 2. Reasons:
//!   `credentials_not_configured`, `provider_not_found`, `credential_not_available`,
//!   `invalid_state` (models.json broken, model unresolvable).
//! - `pi auth print-api-key` / `print-bearer-token [--min-expiry <n>(ms|s|m|h)]`
//!   `--provider <p> | --model <m>`: prints the resolved API key / OAuth access token; errors
//!   exit 1. Without `--provider`, only providers with a stored (`auth.json`) credential are
//!   searched, as upstream does.
//! - `pi auth logout <provider>`: removes the provider's `auth.json` entry.
//! - `pi auth login <provider> [--api-key] [--no-browser]`: for a provider with an account
//!   sign-in (and no `--api-key`), runs its device-code flow ([`crate::auth::device`]: GitHub
//!   Copilot, Kimi Code, xAI, OpenAI Codex with `--no-browser`) and stores the
//!   `{"type":"oauth",…}` entry; otherwise reads an API key and stores
//!   `{"type":"api_key","key":…}`. Answers are read one line each from stdin (upstream
//!   prompts on a terminal and refuses to run without one); prompts go to stderr, progress
//!   (`Open <url> and enter code: <code>`) and the result to stdout. Not offered: the browser
//!   (PKCE with a localhost callback) sign-ins of Anthropic, OpenAI Codex, OpenAI, OpenRouter.
//!
//! `auth.json` is rewritten whole through a temporary file and a rename, mode 0600, while
//! holding the `auth.json.lock` directory lock that upstream pi takes too
//! ([`crate::config::lock`]), after re-reading the file under that lock.

use crate::config::{self, resolve, ModelRegistry};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

/// Default `--min-expiry` of `print-bearer-token`: 30 minutes, in ms.
pub const DEFAULT_MIN_EXPIRY_MS: i64 = 30 * 60_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Check,
    ApiKey,
    BearerToken,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Check => "auth check",
            Kind::ApiKey => "auth print-api-key",
            Kind::BearerToken => "auth print-bearer-token",
        }
    }
    fn usage(self) -> &'static str {
        match self {
            Kind::Check => {
                "pi auth check --provider <provider> [--json] [--credentials] [--no-refresh]"
            }
            Kind::ApiKey => "pi auth print-api-key --provider <provider> [--model <model>]",
            Kind::BearerToken => "pi auth print-bearer-token --provider <provider> [--model <model>] [--min-expiry <duration>]",
        }
    }
}

const HELP: &str = "Usage:
  pi auth login <provider> [--api-key] [--no-browser]
  pi auth logout <provider>
  pi auth print-api-key [--provider <provider>] [--model <model>]
  pi auth print-bearer-token [--provider <provider>] [--model <model>] [--min-expiry <duration>]
  pi auth check [--provider <provider>] [--model <model>] [--json] [--credentials] [--no-refresh]

Store, remove, print or check provider credentials (kept in auth.json in the agent directory).

Commands:
  login <provider>        Sign in (device code) or store an API key read from standard input
  logout <provider>       Remove the stored credential (environment variables and models.json stay)
  print-api-key           Print the API key the provider would use
  print-bearer-token      Print the provider's OAuth access token
  check                   Print ready, not_ready or invalid and exit with 0, 1 or 2

--provider <provider> or --model <model> is required by print-api-key, print-bearer-token and check.

Options:
  --min-expiry <duration> Least remaining token lifetime for print-bearer-token, e.g. 30m or 1h
  --json                  Print the check result as JSON
  --credentials           Print the credential from check, or add it to the JSON output
  --no-refresh            Do not refresh expired OAuth credentials during check
";

struct Parsed {
    kind: Kind,
    provider: Option<String>,
    model: Option<String>,
    json: bool,
    credentials: bool,
    min_expiry_ms: Option<i64>,
    no_refresh: bool,
}

/// An error printed as `Error: <text>`.
struct Failure(String);

fn parse_duration_ms(v: &str) -> Option<i64> {
    let digits = v.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = v.split_at(digits);
    let n: i64 = n.parse().ok()?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Parses `args` (after `auth <command>`); `Err((message, usage line))` for an unknown option.
fn parse(kind: Kind, args: &[String]) -> Result<Parsed, (Failure, Option<&'static str>)> {
    let mut p = Parsed {
        kind,
        provider: None,
        model: None,
        json: false,
        credentials: false,
        min_expiry_ms: None,
        no_refresh: false,
    };
    let mut positional = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "--min-expiry" => {
                if kind != Kind::BearerToken {
                    return Err((
                        Failure("--min-expiry is only supported by print-bearer-token".into()),
                        None,
                    ));
                }
                i += 1;
                p.min_expiry_ms = Some(args.get(i).and_then(|v| parse_duration_ms(v)).ok_or((
                    Failure("--min-expiry must use a duration such as 30m or 1h".into()),
                    None,
                ))?);
            }
            "--json" | "--credentials" | "--no-refresh" => {
                if kind != Kind::Check {
                    return Err((
                        Failure(format!("{a} is only supported by auth check")),
                        None,
                    ));
                }
                match a {
                    "--json" => p.json = true,
                    "--credentials" => p.credentials = true,
                    _ => p.no_refresh = true,
                }
            }
            "--provider" | "--model" => {
                i += 1;
                let v = args.get(i).cloned();
                if a == "--provider" {
                    p.provider = v;
                } else {
                    p.model = v;
                }
            }
            _ if a.starts_with("--") => {
                let name = a.trim_start_matches("--");
                return Err((
                    Failure(format!("Unknown option --{name} for \"{}\".", kind.name())),
                    Some(kind.usage()),
                ));
            }
            _ => positional = true,
        }
        i += 1;
    }
    let trimmed = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    p.provider = trimmed(p.provider);
    p.model = trimmed(p.model);
    if positional {
        return Err((
            Failure("Auth commands only accept --provider and --model".into()),
            None,
        ));
    }
    Ok(p)
}

/// Runs `pi auth <rest…>` against `agent_dir`; returns the exit code.
pub fn run(rest: &[String], agent_dir: &Path) -> i32 {
    run_with(rest, agent_dir, None)
}

/// [`run`] against `registry` when given (one that knows the providers extensions
/// registered), else the registry of `agent_dir`.
pub fn run_with(rest: &[String], agent_dir: &Path, registry: Option<ModelRegistry>) -> i32 {
    let first = rest.first().map(String::as_str);
    if first.is_none() || first == Some("help") || rest.iter().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return 0;
    }
    let kind = match first {
        Some("login") => return login(&rest[1..], agent_dir),
        Some("logout") => return logout(&rest[1..], agent_dir, registry),
        Some("check") => Kind::Check,
        Some("print-api-key") => Kind::ApiKey,
        Some("print-bearer-token") => Kind::BearerToken,
        other => {
            eprintln!(
                "Error: Unknown auth command \"{}\". Use \"pi auth login\", \"pi auth logout\", \"pi auth print-api-key\", \"pi auth print-bearer-token\", or \"pi auth check\".",
                other.unwrap_or_default()
            );
            return 1;
        }
    };
    let parsed = match parse(kind, &rest[1..]) {
        Ok(p) => p,
        Err((Failure(msg), Some(usage))) => {
            eprintln!("{msg}");
            eprintln!("Use \"pi --help\" or \"{usage}\".");
            return 1;
        }
        Err((Failure(msg), None)) => {
            eprintln!("Error: {msg}");
            return if kind == Kind::Check { 2 } else { 1 };
        }
    };
    if parsed.provider.is_none() && parsed.model.is_none() {
        let msg = if kind == Kind::Check {
            "Auth checks require --provider <provider> or --model <model>"
        } else {
            "Credential printing requires --provider <provider> or --model <model>"
        };
        eprintln!("Error: {msg}");
        return if kind == Kind::Check { 2 } else { 1 };
    }
    let registry = registry.unwrap_or_else(|| ModelRegistry::load(agent_dir));
    if kind == Kind::Check {
        return check(&parsed, &registry);
    }
    match print_credential(&parsed, &registry) {
        Ok(value) => {
            println!("{value}");
            0
        }
        Err(Failure(msg)) => {
            eprintln!("Error: {msg}");
            1
        }
    }
}

/// Whether `provider` is known: a built-in provider or one with models in the registry.
fn known_provider(registry: &ModelRegistry, provider: &str) -> Option<String> {
    let lower = provider.to_lowercase();
    pi_ai::models::builtin_providers()
        .iter()
        .map(|p| p.id.clone())
        .chain(registry.providers())
        .find(|p| p.to_lowercase() == lower)
}

/// The credential `provider` would send, without refreshing: the API key (stored, models.json,
/// environment) or the bearer token of `ANTHROPIC_AUTH_TOKEN`.
fn api_credential(registry: &ModelRegistry, provider: &str) -> Option<String> {
    registry
        .api_key(provider)
        .filter(|k| k != pi_ai::env_keys::AUTHENTICATED_MARKER)
        .or_else(|| pi_ai::env_keys::env_bearer_token(provider))
        .or_else(|| pi_ai::env_keys::env_api_key(provider))
}

/// The OAuth access token of `provider`, refreshed first (unless `refresh` is false) when it
/// has less than five minutes or `min_validity_ms` left. `Err` = the refresh failed.
fn oauth_access(
    registry: &ModelRegistry,
    provider: &str,
    min_validity_ms: Option<i64>,
    refresh: bool,
) -> Result<Option<String>, config::RefreshError> {
    Ok(registry
        .auth()
        .oauth_access(provider, min_validity_ms, refresh)?
        .map(|a| a.access))
}

fn check(p: &Parsed, registry: &ModelRegistry) -> i32 {
    let result = check_result(p, registry);
    let status = result["status"].as_str().unwrap_or("invalid").to_string();
    let text = if p.json {
        result.to_string()
    } else {
        result
            .get("credentials")
            .and_then(Value::as_str)
            .unwrap_or(&status)
            .to_string()
    };
    println!("{text}");
    match status.as_str() {
        "ready" => 0,
        "not_ready" => 1,
        _ => 2,
    }
}

fn check_result(p: &Parsed, registry: &ModelRegistry) -> Value {
    let invalid = |provider: &str| json!({"status": "invalid", "provider": provider, "reason": "invalid_state"});
    let not_ready = |provider: &str, reason: &str| json!({"status": "not_ready", "provider": provider, "reason": reason});
    let mut provider = p.provider.clone();
    if let Some(model) = &p.model {
        let stored = |id: &str| registry.auth().has_entry(id);
        match resolve::resolve_cli_model_with(
            p.provider.as_deref(),
            Some(model),
            None,
            registry,
            &stored,
        ) {
            Ok(Some(m)) => provider = Some(m.model.provider),
            _ => return invalid(p.provider.as_deref().unwrap_or(model)),
        }
    }
    let Some(provider) = provider else {
        return invalid("");
    };
    if registry.error().is_some() {
        return invalid(&provider);
    }
    let Some(id) = known_provider(registry, &provider) else {
        return not_ready(&provider, "provider_not_found");
    };
    if !registry.has_auth(&id) {
        return not_ready(&provider, "credentials_not_configured");
    }
    let oauth = registry.auth().is_oauth(&id);
    // Upstream resolves (and so refreshes) the credential unless `--no-refresh`; a failed
    // refresh makes the state invalid.
    let access = if oauth {
        match oauth_access(registry, &id, None, !p.no_refresh) {
            Ok(Some(a)) => Some(a),
            Ok(None) => return not_ready(&provider, "credentials_not_configured"),
            Err(_) => return invalid(&provider),
        }
    } else {
        None
    };
    let mut out = json!({"status": "ready", "provider": provider, "authType": if oauth { "oauth" } else { "api_key" }});
    if p.credentials {
        let value = if oauth {
            access
        } else {
            api_credential(registry, &id)
        };
        match value {
            Some(v) => out["credentials"] = Value::String(v),
            None => return not_ready(&provider, "credential_not_available"),
        }
    }
    out
}

fn print_credential(p: &Parsed, registry: &ModelRegistry) -> Result<String, Failure> {
    let stored = |id: &str| -> Option<&'static str> {
        match registry.auth().get(id)? {
            config::AuthCredential::OAuth { .. } => Some("oauth"),
            config::AuthCredential::ApiKey { .. } => Some("api_key"),
            config::AuthCredential::Other(_) => None,
        }
    };
    let mut providers: Vec<String> = Vec::new();
    match &p.provider {
        Some(name) => {
            let id = known_provider(registry, name).ok_or_else(|| {
                Failure(format!(
                    "Unknown provider \"{name}\". Use --list-models to see available providers."
                ))
            })?;
            if let Some(model) = &p.model {
                resolve::resolve_cli_model(Some(&id), Some(model), None, registry)
                    .map_err(Failure)?;
            }
            providers.push(id);
        }
        None => {
            let model = p.model.clone().unwrap_or_default();
            let ids: Vec<String> = pi_ai::models::builtin_providers()
                .iter()
                .map(|b| b.id.clone())
                .chain(registry.providers())
                .collect();
            for id in ids {
                if stored(&id).is_none() || providers.contains(&id) {
                    continue;
                }
                let hit = resolve::resolve_model_reference(
                    &model,
                    Some(&id),
                    resolve::SuffixMode::Strict,
                    true,
                    registry.all(),
                    &|_| true,
                );
                if matches!(hit, resolve::Reference::Resolved { .. }) {
                    providers.push(id);
                }
            }
            if providers.is_empty() {
                return Err(Failure(format!(
                    "Model \"{model}\" not found. Use --list-models to see available models."
                )));
            }
        }
    }
    let min = p.min_expiry_ms.unwrap_or(DEFAULT_MIN_EXPIRY_MS);
    let mut found: Vec<(String, String)> = Vec::new();
    for id in &providers {
        let kind = stored(id);
        let value = match p.kind {
            Kind::ApiKey if kind == Some("oauth") => continue,
            Kind::BearerToken if kind != Some("oauth") => continue,
            // A failed refresh is upstream's generic resolution failure.
            Kind::BearerToken => oauth_access(registry, id, Some(min), true)
                .map_err(|_| Failure("Failed to resolve credential".into()))?,
            _ => api_credential(registry, id),
        };
        if let Some(v) = value {
            found.push((id.clone(), v));
        }
    }
    match found.len() {
        1 => Ok(found.remove(0).1),
        0 => {
            let first = providers.first().map(String::as_str).unwrap_or_default();
            let kind = stored(first);
            if p.provider.is_some() && p.kind == Kind::ApiKey && kind == Some("oauth") {
                return Err(Failure(format!(
                    "Provider \"{first}\" is configured with OAuth, not an API key"
                )));
            }
            if p.provider.is_some() && p.kind == Kind::BearerToken && kind != Some("oauth") {
                return Err(Failure(format!(
                    "Provider \"{first}\" is not configured with an OAuth bearer token"
                )));
            }
            Err(Failure(format!(
                "No usable {} is configured",
                if p.kind == Kind::ApiKey {
                    "API key"
                } else {
                    "OAuth bearer token"
                }
            )))
        }
        _ => Err(Failure(format!(
            "Multiple configured providers matched ({}). Specify --provider.",
            found
                .iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn display_name(provider: &str) -> String {
    pi_ai::models::builtin_provider(provider)
        .map(|p| p.name.clone())
        .unwrap_or_else(|| provider.to_string())
}

fn logout(args: &[String], agent_dir: &Path, registry: Option<ModelRegistry>) -> i32 {
    let [provider] = args else {
        eprintln!("Usage: pi auth logout <provider>");
        return 1;
    };
    if provider.starts_with('-') {
        eprintln!("Usage: pi auth logout <provider>");
        return 1;
    }
    let registry = registry.unwrap_or_else(|| ModelRegistry::load(agent_dir));
    let known = known_provider(&registry, provider);
    let id = known.clone().unwrap_or_else(|| provider.clone());
    let mut removed: Option<Value> = None;
    let result = config::update_auth_file(agent_dir, |entries| {
        removed = entries.remove(&id);
        removed.is_some()
    });
    if let Err(e) = result {
        eprintln!("Logout failed: {e}");
        return 1;
    }
    let name = display_name(&id);
    match removed {
        None if known.is_none() => {
            eprintln!("Unknown provider \"{provider}\".");
            let mut stored: Vec<String> = match config::read_auth_entries(agent_dir) {
                Ok(m) => m.keys().cloned().collect(),
                Err(_) => Vec::new(),
            };
            stored.sort();
            let list = if stored.is_empty() {
                "none".to_string()
            } else {
                stored.join(", ")
            };
            eprintln!("Stored credentials: {list}");
            1
        }
        None => {
            println!("No stored credentials for {name}. Environment variables and models.json config are unchanged.");
            0
        }
        Some(v) if v.get("type").and_then(Value::as_str) == Some("oauth") => {
            println!("Logged out of {name}.");
            0
        }
        Some(_) => {
            println!("Removed stored API key for {name}. Environment variables and models.json config are unchanged.");
            0
        }
    }
}

const LOGIN_USAGE: &str = "pi auth login <provider> [--api-key] [--no-browser]";

/// Prompts on standard error and reads answers from standard input, one line each (upstream
/// asks on a terminal and refuses to run without one; here piped input works too).
struct StdioInteraction;

impl crate::auth::device::Interaction for StdioInteraction {
    fn question(&mut self, message: &str) -> Option<String> {
        eprint!("{message}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_string()),
        }
    }
    fn write(&mut self, line: &str) {
        println!("{line}");
        let _ = std::io::stdout().flush();
    }
}

fn login(args: &[String], agent_dir: &Path) -> i32 {
    let mut provider: Option<&String> = None;
    let (mut api_key, mut no_browser) = (false, false);
    for a in args {
        match a.as_str() {
            "--api-key" => api_key = true,
            "--no-browser" => no_browser = true,
            s if s.starts_with('-') || provider.is_some() => {
                eprintln!("Usage: {LOGIN_USAGE}");
                return 1;
            }
            _ => provider = Some(a),
        }
    }
    let Some(provider) = provider else {
        eprintln!("Usage: {LOGIN_USAGE}");
        return 1;
    };
    if api_key && no_browser {
        eprintln!("--no-browser only applies to account sign-in; omit it with --api-key.");
        return 1;
    }
    let registry = ModelRegistry::load(agent_dir);
    let Some(id) = known_provider(&registry, provider) else {
        eprintln!("Unknown provider \"{provider}\".");
        let mut ids: Vec<&str> = pi_ai::models::builtin_providers()
            .iter()
            .filter(|p| p.oauth || !p.env_vars.is_empty())
            .map(|p| p.id.as_str())
            .collect();
        ids.sort_unstable();
        eprintln!("Providers: {}", ids.join(", "));
        return 1;
    };
    let name = display_name(&id);
    let builtin = pi_ai::models::builtin_provider(&id);
    let has_oauth = builtin.is_some_and(|b| b.oauth);
    // Custom (models.json) providers take a key; built-ins when they read one.
    let has_key_login = builtin.is_none_or(|b| !b.env_vars.is_empty());
    let mut ui = StdioInteraction;
    let entry = if !api_key && has_oauth {
        let result = crate::auth::http::blocking(|| {
            match crate::auth::pkce::login(&id, no_browser, &mut ui) {
                Err(None) => crate::auth::device::login(&id, no_browser, &mut ui),
                done => done,
            }
        });
        match result {
            Ok(Ok(entry)) => Value::Object(entry),
            Ok(Err(None)) => {
                let hint = if has_key_login {
                    format!("run \"pi auth login {id} --api-key\" to store an API key")
                } else {
                    "no other sign-in method is available".into()
                };
                eprintln!("Failed to log in to {name}: browser sign-in is not available in this build; {hint}.");
                return 1;
            }
            Ok(Err(Some(message))) if message == "Login cancelled" => {
                eprintln!("Login cancelled.");
                return 1;
            }
            Ok(Err(Some(message))) | Err(message) => {
                eprintln!("Failed to log in to {name}: {message}");
                return 1;
            }
        }
    } else if has_key_login {
        use crate::auth::device::Interaction;
        let Some(line) = ui.question(&format!("Enter {name} API key: ")) else {
            eprintln!("\nLogin cancelled.");
            return 1;
        };
        eprintln!();
        let key = line.trim().to_string();
        if key.is_empty() {
            eprintln!("Login cancelled.");
            return 1;
        }
        json!({"type": "api_key", "key": key})
    } else if api_key && has_oauth {
        eprintln!("{name} has no API key login. Omit --api-key to sign in.");
        return 1;
    } else {
        eprintln!("{name} is configured outside pi (ambient credentials).");
        return 1;
    };
    let oauth = entry["type"] == "oauth";
    let result = config::update_auth_file(agent_dir, |entries| {
        entries.insert(id.clone(), entry);
        true
    });
    match result {
        Ok(path) => {
            let what = if oauth {
                format!("Logged in to {name}")
            } else {
                format!("Saved API key for {name}")
            };
            println!("{what}. Credentials saved to {}", path.display());
            0
        }
        Err(e) => {
            eprintln!("Failed to log in to {name}: {e}");
            1
        }
    }
}
