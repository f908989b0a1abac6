//! Provider → API-key environment variables (upstream `packages/ai/src/env-api-keys.ts`).

/// `ANTHROPIC_AUTH_TOKEN`: counted by [`find_env_keys`] but never returned by
/// [`env_api_key`], because it must be sent as `Authorization: Bearer`.
pub const ANTHROPIC_AUTH_TOKEN_ENV: &str = "ANTHROPIC_AUTH_TOKEN";

/// The environment variables that can hold an API key for `provider`, in priority order;
/// empty for providers without one (custom providers, ambient-credential providers).
pub fn env_key_vars(provider: &str) -> &'static [&'static str] {
    match provider {
        "github-copilot" => &["COPILOT_GITHUB_TOKEN"],
        "anthropic" => &[
            ANTHROPIC_AUTH_TOKEN_ENV,
            "ANTHROPIC_OAUTH_TOKEN",
            "ANTHROPIC_API_KEY",
        ],
        "ant-ling" => &["ANT_LING_API_KEY"],
        "qwen-token-plan" | "qwen-token-plan-individual" => &["QWEN_TOKEN_PLAN_API_KEY"],
        "qwen-token-plan-cn" => &["QWEN_TOKEN_PLAN_CN_API_KEY"],
        "openai" => &["OPENAI_API_KEY"],
        "azure-openai-responses" => &["AZURE_OPENAI_API_KEY"],
        "nvidia" => &["NVIDIA_API_KEY"],
        "deepseek" => &["DEEPSEEK_API_KEY"],
        "google" => &["GEMINI_API_KEY"],
        "google-vertex" => &["GOOGLE_CLOUD_API_KEY"],
        "groq" => &["GROQ_API_KEY"],
        "cerebras" => &["CEREBRAS_API_KEY"],
        "xai" => &["XAI_API_KEY"],
        "radius" => &["RADIUS_API_KEY"],
        "openrouter" => &["OPENROUTER_API_KEY"],
        "vercel-ai-gateway" => &["AI_GATEWAY_API_KEY"],
        "zai" => &["ZAI_API_KEY"],
        "zai-coding-cn" => &["ZAI_CODING_CN_API_KEY"],
        "mistral" => &["MISTRAL_API_KEY"],
        "minimax" => &["MINIMAX_API_KEY"],
        "minimax-cn" => &["MINIMAX_CN_API_KEY"],
        "moonshotai" | "moonshotai-cn" => &["MOONSHOT_API_KEY"],
        "huggingface" => &["HF_TOKEN"],
        "fireworks" => &["FIREWORKS_API_KEY"],
        "together" => &["TOGETHER_API_KEY"],
        "baseten" => &["BASETEN_API_KEY"],
        "opencode" | "opencode-go" => &["OPENCODE_API_KEY"],
        "kimi-coding" => &["KIMI_API_KEY"],
        "cloudflare-workers-ai" | "cloudflare-ai-gateway" => &["CLOUDFLARE_API_KEY"],
        "xiaomi" => &["XIAOMI_API_KEY"],
        "xiaomi-token-plan-cn" => &["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
        "xiaomi-token-plan-ams" => &["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
        "xiaomi-token-plan-sgp" => &["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
        _ => &[],
    }
}

fn non_empty_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The variables from [`env_key_vars`] that are set (non-empty) in this process.
pub fn find_env_keys(provider: &str) -> Vec<&'static str> {
    env_key_vars(provider)
        .iter()
        .copied()
        .filter(|v| non_empty_var(v).is_some())
        .collect()
}

/// The API key for `provider` from the environment, e.g. `OPENAI_API_KEY` for `openai`;
/// for `anthropic`: `ANTHROPIC_OAUTH_TOKEN`, then `ANTHROPIC_API_KEY`. `amazon-bedrock` and
/// `google-vertex` with ambient credentials yield the marker `"<authenticated>"`.
pub fn env_api_key(provider: &str) -> Option<String> {
    let key = env_key_vars(provider)
        .iter()
        .filter(|v| !(provider == "anthropic" && **v == ANTHROPIC_AUTH_TOKEN_ENV))
        .find_map(|v| non_empty_var(v));
    if key.is_some() {
        return key;
    }
    match provider {
        "amazon-bedrock" => {
            let any = |names: &[&str]| names.iter().any(|n| non_empty_var(n).is_some());
            let authenticated = any(&["AWS_PROFILE"])
                || (any(&["AWS_ACCESS_KEY_ID"]) && any(&["AWS_SECRET_ACCESS_KEY"]))
                || any(&[
                    "AWS_BEARER_TOKEN_BEDROCK",
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                    "AWS_WEB_IDENTITY_TOKEN_FILE",
                ]);
            authenticated.then(|| "<authenticated>".to_owned())
        }
        "google-vertex" => {
            let creds = match non_empty_var("GOOGLE_APPLICATION_CREDENTIALS") {
                Some(p) => std::path::Path::new(&p).exists(),
                None => non_empty_var("HOME")
                    .map(|h| {
                        std::path::Path::new(&h)
                            .join(".config/gcloud/application_default_credentials.json")
                            .exists()
                    })
                    .unwrap_or(false),
            };
            let project = non_empty_var("GOOGLE_CLOUD_PROJECT").is_some()
                || non_empty_var("GCLOUD_PROJECT").is_some();
            let location = non_empty_var("GOOGLE_CLOUD_LOCATION").is_some();
            (creds && project && location).then(|| "<authenticated>".to_owned())
        }
        _ => None,
    }
}
