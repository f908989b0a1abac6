//! Container credentials and EC2 instance metadata (IMDSv2), and reading the credential JSON
//! they (and `credential_process`) answer with.

use super::wire::parse_iso8601;
use super::wire::percent;
use super::METADATA_TIMEOUT;
use super::{with_cache, Ctx, Timed};
use crate::providers::bedrock_converse_stream::AwsKeys;
use serde_json::Value;

impl<'a> Ctx<'a> {
    pub(super) async fn container(&self) -> Result<Timed, String> {
        let url = match (
            self.env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
            self.env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
        ) {
            (Some(rel), _) => format!("http://169.254.170.2{rel}"),
            (None, Some(full)) => {
                check_container_uri(full)?;
                full.to_owned()
            }
            (None, None) => {
                return Err(
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI is not set".to_owned(),
                )
            }
        };
        with_cache(format!("container\0{url}"), self.fetch_container(&url)).await
    }

    async fn fetch_container(&self, url: &str) -> Result<Timed, String> {
        let auth = match self.env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
            Some(file) => Some(
                std::fs::read_to_string(file)
                    .map_err(|e| {
                        format!("cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {file}: {e}")
                    })?
                    .trim()
                    .to_owned(),
            ),
            None => self
                .env
                .get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
                .map(str::to_owned),
        };
        let mut request = self.http.get(url).timeout(METADATA_TIMEOUT);
        if let Some(auth) = auth {
            request = request.header(reqwest::header::AUTHORIZATION, auth);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("cannot reach {url}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(format!(
                "{url} answered HTTP {}: {}",
                status.as_u16(),
                text.trim()
            ));
        }
        let v: Value =
            serde_json::from_str(&text).map_err(|e| format!("{url} answered no JSON: {e}"))?;
        json_keys(&v, "Token").map_err(|m| format!("{url}: the answer {m}"))
    }

    pub(super) async fn imds(&self) -> Result<Timed, String> {
        let base = self
            .env
            .get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
            .unwrap_or("http://169.254.169.254")
            .trim_end_matches('/')
            .to_owned();
        with_cache(format!("imds\0{base}"), self.fetch_imds(&base)).await
    }

    async fn fetch_imds(&self, base: &str) -> Result<Timed, String> {
        let send = |r: reqwest::RequestBuilder| async move {
            let response = r
                .timeout(METADATA_TIMEOUT)
                .send()
                .await
                .map_err(|e| format!("instance metadata: {e}"))?;
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            if status.is_success() {
                Ok(text)
            } else {
                Err(format!(
                    "instance metadata answered HTTP {}",
                    status.as_u16()
                ))
            }
        };
        let token = send(
            self.http
                .put(format!("{base}/latest/api/token"))
                .header("x-aws-ec2-metadata-token-ttl-seconds", "21600"),
        )
        .await?;
        let token = token.trim().to_owned();
        let prefix = format!("{base}/latest/meta-data/iam/security-credentials/");
        let roles = send(
            self.http
                .get(&prefix)
                .header("x-aws-ec2-metadata-token", &token),
        )
        .await?;
        let role = roles
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .ok_or_else(|| "instance metadata lists no role".to_owned())?
            .to_owned();
        let text = send(
            self.http
                .get(format!("{prefix}{}", percent(&role)))
                .header("x-aws-ec2-metadata-token", &token),
        )
        .await?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| format!("instance metadata: {e}"))?;
        json_keys(&v, "Token").map_err(|m| format!("instance metadata {m}"))
    }
}

/// The SDK accepts a full container URI over HTTPS, or over HTTP only to a loopback address
/// or the ECS/EKS link-local hosts.
pub(super) fn check_container_uri(uri: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(uri).map_err(|e| format!("{uri} is not a URL: {e}"))?;
    if parsed.scheme() == "https" {
        return Ok(());
    }
    let host = parsed.host_str().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let allowed = match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => {
            ip.is_loopback()
                || ip.octets() == [169, 254, 170, 2]
                || ip.octets() == [169, 254, 170, 23]
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.segments() == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23]
        }
        Err(_) => host == "localhost",
    };
    if parsed.scheme() == "http" && allowed {
        Ok(())
    } else {
        Err(format!(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI {uri} must use HTTPS, or HTTP to a loopback or the ECS/EKS container host"
        ))
    }
}

/// `AccessKeyId`, `SecretAccessKey`, the session token under `token_key` and `Expiration`
/// (ISO 8601) of a JSON credentials answer.
pub(super) fn json_keys(v: &Value, token_key: &str) -> Result<Timed, String> {
    let get = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Ok(Timed {
        keys: AwsKeys {
            access_key_id: get("AccessKeyId").ok_or("lacks AccessKeyId")?,
            secret_access_key: get("SecretAccessKey").ok_or("lacks SecretAccessKey")?,
            session_token: get(token_key),
        },
        expires: get("Expiration").and_then(|e| parse_iso8601(&e)),
    })
}
