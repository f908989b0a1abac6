//! The shared config and credentials files (`~/.aws/config`, `~/.aws/credentials`) and the
//! links of a profile: assume-role (with its source profile or credential source), static keys,
//! web identity through STS, and `credential_process`.

use super::metadata::json_keys;
use super::wire::{default_session_name, form_encode, parse_iso8601, xml_text};
use super::SERVICE_TIMEOUT;
use super::{with_cache, BoxFuture, Ctx, Timed};
use crate::providers::bedrock_converse_stream::{AwsEnv, AwsKeys};
use serde_json::Value;
use std::collections::HashMap;

pub(super) type Section = HashMap<String, String>;

/// Profiles of the two shared files by name: `[name]` of the credentials file over
/// `[profile name]` (or `[default]`) of the config file, key by key; `sso-session <name>`
/// sections of the config file are kept under that full title.
pub(super) fn load_profiles(env: &AwsEnv) -> HashMap<String, Section> {
    let mut out: HashMap<String, Section> = HashMap::new();
    let read = |var: &str, default: &str| {
        env.shared_file(var, default)
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    };
    for (title, section) in ini_sections(&read("AWS_CONFIG_FILE", "config")) {
        let name = if title == "default" {
            Some("default".to_owned())
        } else if let Some(n) = title.strip_prefix("profile ") {
            Some(n.trim().to_owned())
        } else if title.starts_with("sso-session ") {
            Some(title.clone())
        } else {
            None
        };
        if let Some(name) = name {
            out.entry(name).or_default().extend(section);
        }
    }
    for (title, section) in ini_sections(&read("AWS_SHARED_CREDENTIALS_FILE", "credentials")) {
        out.entry(title).or_default().extend(section);
    }
    out
}

/// Every `[title]` section of an AWS shared file with its `key = value` pairs (keys
/// lower-cased, `#`/`;` comment lines and indented sub-settings skipped).
pub(super) fn ini_sections(text: &str) -> Vec<(String, Section)> {
    let mut out: Vec<(String, Section)> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(title) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            out.push((title.trim().to_owned(), Section::new()));
            continue;
        }
        if raw.starts_with(' ') || raw.starts_with('\t') {
            continue;
        }
        if let (Some((_, map)), Some((k, v))) = (out.last_mut(), line.split_once('=')) {
            map.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    out
}

pub(super) fn non_empty<'s>(s: &'s Section, key: &str) -> Option<&'s str> {
    s.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

pub(super) fn static_keys(s: &Section) -> Option<Timed> {
    Some(Timed {
        keys: AwsKeys {
            access_key_id: non_empty(s, "aws_access_key_id")?.to_owned(),
            secret_access_key: non_empty(s, "aws_secret_access_key")?.to_owned(),
            session_token: non_empty(s, "aws_session_token").map(str::to_owned),
        },
        expires: None,
    })
}

pub(super) fn is_sso(s: &Section) -> bool {
    [
        "sso_start_url",
        "sso_account_id",
        "sso_session",
        "sso_region",
        "sso_role_name",
    ]
    .iter()
    .any(|k| s.contains_key(*k))
}

impl<'a> Ctx<'a> {
    /// The credentials of profile `name`; `visited` holds the source profiles followed so far
    /// (non-empty inside a `source_profile`). `Ok(None)`: the profile configures nothing.
    pub(super) fn profile(
        &'a self,
        name: &'a str,
        visited: Vec<String>,
    ) -> BoxFuture<'a, Result<Option<Timed>, String>> {
        Box::pin(async move {
            let Some(data) = self.profiles.get(name) else {
                return Err(format!("source profile [{name}] was not found"));
            };
            let nested = !visited.is_empty();
            if nested {
                if let Some(t) = static_keys(data) {
                    return Ok(Some(t));
                }
            }
            let role_arn = non_empty(data, "role_arn");
            let source_profile = non_empty(data, "source_profile");
            let credential_source = non_empty(data, "credential_source");
            if nested && role_arn.is_none() && credential_source.is_some() {
                return self
                    .credential_source(credential_source, name)
                    .await
                    .map(Some);
            }
            if let Some(role_arn) = role_arn {
                if source_profile.is_some() != credential_source.is_some() {
                    return self
                        .assume_role(
                            name,
                            data,
                            role_arn,
                            source_profile,
                            credential_source,
                            visited,
                        )
                        .await
                        .map(Some);
                }
            }
            if let Some(t) = static_keys(data) {
                return Ok(Some(t));
            }
            if let (Some(file), Some(role)) = (non_empty(data, "web_identity_token_file"), role_arn)
            {
                let session = non_empty(data, "role_session_name");
                let region = non_empty(data, "region")
                    .or_else(|| self.env.configured_region())
                    .map(str::to_owned);
                return self
                    .web_identity(file, role, session, region.as_deref())
                    .await
                    .map(Some);
            }
            if let Some(command) = non_empty(data, "credential_process") {
                return self.process(command).await.map(Some);
            }
            if is_sso(data) {
                return self.sso(name, data).await.map(Some);
            }
            Ok(None)
        })
    }

    async fn credential_source(
        &self,
        source: Option<&str>,
        profile: &str,
    ) -> Result<Timed, String> {
        match source.unwrap_or("") {
            "Environment" => match (
                self.env.get("AWS_ACCESS_KEY_ID"),
                self.env.get("AWS_SECRET_ACCESS_KEY"),
            ) {
                (Some(id), Some(secret)) => Ok(Timed {
                    keys: AwsKeys {
                        access_key_id: id.to_owned(),
                        secret_access_key: secret.to_owned(),
                        session_token: self.env.get("AWS_SESSION_TOKEN").map(str::to_owned),
                    },
                    expires: None,
                }),
                _ => Err("credential_source Environment, but AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set".to_owned()),
            },
            "EcsContainer" => self.container().await,
            "Ec2InstanceMetadata" => self.imds().await,
            other => Err(format!(
                "unsupported credential_source {other:?} in profile [{profile}] (expected EcsContainer, Ec2InstanceMetadata or Environment)"
            )),
        }
    }

    async fn assume_role(
        &'a self,
        name: &'a str,
        data: &'a Section,
        role_arn: &'a str,
        source_profile: Option<&'a str>,
        credential_source: Option<&'a str>,
        visited: Vec<String>,
    ) -> Result<Timed, String> {
        if let Some(serial) = non_empty(data, "mfa_serial") {
            // The SDK needs an MFA code callback here, and pi passes none (in any mode).
            return Err(format!(
                "the role {role_arn} requires multi-factor authentication (mfa_serial {serial}), but pi cannot ask for an MFA code; use credentials that need none (e.g. from `aws configure export-credentials` or a credential_process)"
            ));
        }
        let source = match source_profile {
            Some(src) => {
                if visited.iter().any(|v| v == src) {
                    return Err(format!(
                        "source profiles form a cycle: {} -> {src}",
                        visited.join(" -> ")
                    ));
                }
                let mut next = visited.clone();
                next.push(src.to_owned());
                match self.profile(src, next).await? {
                    Some(t) => t,
                    None => {
                        return Err(format!("source profile [{src}] has no credentials"));
                    }
                }
            }
            None => self.credential_source(credential_source, name).await?,
        };
        let region = non_empty(data, "region")
            .or_else(|| self.env.configured_region())
            .unwrap_or("us-east-1")
            .to_owned();
        let session = non_empty(data, "role_session_name")
            .map(str::to_owned)
            .unwrap_or_else(default_session_name);
        let duration = non_empty(data, "duration_seconds")
            .unwrap_or("3600")
            .to_owned();
        let key = format!(
            "assume-role\0{name}\0{role_arn}\0{}",
            source.keys.access_key_id
        );
        let mut params = vec![
            ("Action", "AssumeRole".to_owned()),
            ("Version", "2011-06-15".to_owned()),
            ("RoleArn", role_arn.to_owned()),
            ("RoleSessionName", session),
            ("DurationSeconds", duration),
        ];
        if let Some(id) = non_empty(data, "external_id") {
            params.push(("ExternalId", id.to_owned()));
        }
        with_cache(key, self.sts(&params, &region, Some(&source.keys)))
            .await
            .map_err(|e| format!("STS AssumeRole for {role_arn} failed: {e}"))
    }

    pub(super) async fn web_identity(
        &self,
        file: &str,
        role_arn: &str,
        session: Option<&str>,
        region: Option<&str>,
    ) -> Result<Timed, String> {
        let key = format!("web-identity\0{file}\0{role_arn}");
        with_cache(key, async {
            let token = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read the web identity token file {file}: {e}"))?;
            let params = vec![
                ("Action", "AssumeRoleWithWebIdentity".to_owned()),
                ("Version", "2011-06-15".to_owned()),
                ("RoleArn", role_arn.to_owned()),
                (
                    "RoleSessionName",
                    session
                        .map(str::to_owned)
                        .unwrap_or_else(default_session_name),
                ),
                ("WebIdentityToken", token.trim().to_owned()),
            ];
            self.sts(&params, region.unwrap_or("us-east-1"), None)
                .await
                .map_err(|e| format!("STS AssumeRoleWithWebIdentity for {role_arn} failed: {e}"))
        })
        .await
    }

    /// One STS query-API call (POST, form body), SigV4-signed with `signer` when given; the
    /// `<Credentials>` of its XML answer.
    async fn sts(
        &self,
        params: &[(&str, String)],
        region: &str,
        signer: Option<&AwsKeys>,
    ) -> Result<Timed, String> {
        let endpoint = self
            .endpoint("AWS_ENDPOINT_URL_STS")
            .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
        let url = format!("{endpoint}/");
        let body = form_encode(params);
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static(
                "application/x-www-form-urlencoded; charset=utf-8",
            ),
        );
        if let Some(keys) = signer {
            crate::providers::bedrock_converse_stream::sign_sigv4(
                &mut headers,
                "POST",
                &url,
                body.as_bytes(),
                keys,
                region,
                "sts",
            )
            .map_err(|e| e.to_string())?;
        }
        let response = self
            .http
            .post(&url)
            .headers(headers)
            .body(body)
            .timeout(SERVICE_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("cannot reach {url}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let code = xml_text(&text, "Code").unwrap_or_default();
            let message = xml_text(&text, "Message").unwrap_or_else(|| text.clone());
            return Err(format!("HTTP {}: {code}: {message}", status.as_u16()));
        }
        let creds = xml_text(&text, "Credentials")
            .ok_or_else(|| "the answer has no Credentials".to_owned())?;
        let field = |name: &str| {
            xml_text(&creds, name).ok_or_else(|| format!("the answer's Credentials lack {name}"))
        };
        Ok(Timed {
            keys: AwsKeys {
                access_key_id: field("AccessKeyId")?,
                secret_access_key: field("SecretAccessKey")?,
                session_token: Some(field("SessionToken")?),
            },
            expires: xml_text(&creds, "Expiration").and_then(|e| parse_iso8601(&e)),
        })
    }

    async fn process(&self, command: &str) -> Result<Timed, String> {
        with_cache(format!("process\0{command}"), self.run_process(command)).await
    }

    async fn run_process(&self, command: &str) -> Result<Timed, String> {
        let output = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("credential_process could not be started: {e}"))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!(
                "credential_process exited with {}: {}",
                output.status,
                stderr.trim()
            ));
        }
        let v: Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| format!("credential_process printed no JSON: {e}"))?;
        if v.get("Version").and_then(Value::as_u64) != Some(1) {
            return Err("credential_process output must have \"Version\": 1".to_owned());
        }
        json_keys(&v, "SessionToken").map_err(|m| format!("credential_process output {m}"))
    }
}
