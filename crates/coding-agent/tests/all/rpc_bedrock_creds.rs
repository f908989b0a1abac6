//! Amazon Bedrock credentials beyond static keys (issue 14), end to end: `pi --mode rpc`
//! against the fake ConverseStream wire, with the AWS credential endpoints faked on 127.0.0.1
//! (`pi_fakellm::wire_aws_creds`: STS, SSO portal, container, instance metadata). Each test
//! checks that the Bedrock request's SigV4 credential scope names the access key that source
//! returned, and that its session token went along (`x-amz-security-token`); then the chain's
//! order, the in-process cache of temporary credentials, errors naming the profile, and the
//! strict-tool-limit fallback.

use crate::common::*;
use pi_fakellm::wire_aws_creds::{
    AwsCredsRequest, AwsCredsServer, ECS_AUTH_TOKEN, ECS_KEY, IMDS_KEY, SSO_ACCESS_TOKEN,
    SSO_CLIENT_ID, SSO_CLIENT_SECRET, SSO_KEY, SSO_NEW_REFRESH_TOKEN, SSO_REFRESHED_ACCESS_TOKEN,
    SSO_REFRESH_TOKEN, STS_ROLE_KEY, WEB_IDENTITY_KEY,
};
use pi_fakellm::{FakeLlm, Script, Turn};
use serde_json::{json, Value};

const MODEL: &str = "amazon.nova-lite-v1:0";

/// A fake Bedrock, a run root pointed at it, and the credential fake.
struct Setup {
    fake: FakeLlm,
    root: RunRoot,
    creds: AwsCredsServer,
}

fn setup(turns: usize, expires_in: i64) -> Setup {
    let script = Script::new((0..turns).map(|i| Turn::text(format!("Answer {i}."))));
    let fake = FakeLlm::spawn(script).expect("fake");
    let root = RunRoot::new(fake.port());
    root.write_agent_file(
        "models.json",
        &json!({"providers": {"amazon-bedrock": {
            "baseUrl": format!("http://127.0.0.1:{}/bedrock", fake.port())}}}),
    );
    root.write_agent_file(
        "settings.json",
        &json!({"defaultProvider": "amazon-bedrock", "defaultModel": MODEL,
                "defaultThinkingLevel": "off", "retry": {"enabled": false}}),
    );
    let creds = AwsCredsServer::spawn(expires_in).expect("creds fake");
    Setup { fake, root, creds }
}

impl Setup {
    /// Writes `~/.aws/config` (and `~/.aws/credentials` when given) under the run's HOME.
    fn aws_files(&self, config: &str, credentials: Option<&str>) {
        let aws = self.root.home.join(".aws");
        std::fs::create_dir_all(&aws).unwrap();
        std::fs::write(aws.join("config"), config).unwrap();
        if let Some(c) = credentials {
            std::fs::write(aws.join("credentials"), c).unwrap();
        }
    }

    /// The variables every test passes: endpoints on the fake, instance metadata off unless a
    /// test turns it on, a region.
    fn env(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let base = self.creds.base_url();
        let mut v: Vec<(String, String)> = vec![
            ("AWS_REGION".into(), "us-west-2".into()),
            ("AWS_ENDPOINT_URL_STS".into(), format!("{base}/sts")),
            ("AWS_ENDPOINT_URL_SSO".into(), format!("{base}/sso")),
            ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
        ];
        for (k, val) in extra {
            v.retain(|(name, _)| name != k);
            v.push(((*k).to_owned(), (*val).to_owned()));
        }
        v
    }

    /// Runs `prompts` prompts in one `pi` process; the assistant messages.
    fn run(&self, extra: &[(&str, &str)], prompts: usize) -> Vec<Value> {
        let env = self.env(extra);
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut agent = self.root.spawn_with_env(false, &[], &pairs);
        for i in 0..prompts {
            let from = agent.len();
            let r = agent
                .request(json!({"id": format!("p{i}"), "type": "prompt", "message": "Hello?"}));
            assert_eq!(r["success"], true, "{r}");
            agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
        }
        let m = agent.request(json!({"id": "m", "type": "get_messages"}));
        m["data"]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m["role"] == "assistant")
            .collect()
    }

    fn bedrock_requests(&self) -> Vec<pi_fakellm::RecordedRequest> {
        self.fake.llm_requests()
    }

    /// One prompt with `extra` is answered, its Bedrock request signed with `key` (and
    /// carrying `token-<key>`).
    fn signed_with(&self, extra: &[(&str, &str)], key: &str) {
        assert_answered(&self.run(extra, 1));
        assert_signed_with(self, key);
    }

    /// One prompt with `extra` fails before any Bedrock request: its `errorMessage`.
    fn error_with(&self, extra: &[(&str, &str)]) -> String {
        let msgs = self.run(extra, 1);
        assert_eq!(msgs.len(), 1, "{msgs:?}");
        assert_eq!(msgs[0]["stopReason"], "error", "{}", msgs[0]);
        assert!(self.bedrock_requests().is_empty());
        msgs[0]["errorMessage"].as_str().unwrap_or("").to_owned()
    }

    /// The credential fake's requests under `prefix` (`/sts`, `/sso`, `/oidc` …).
    fn creds_requests(&self, prefix: &str) -> Vec<AwsCredsRequest> {
        self.creds
            .requests()
            .into_iter()
            .filter(|r| r.path.starts_with(prefix))
            .collect()
    }
}

/// A request's header `name` (empty when absent).
fn header<'r>(r: &'r AwsCredsRequest, name: &str) -> &'r str {
    r.headers.get(name).map(String::as_str).unwrap_or("")
}

/// The access key of a SigV4 `Authorization` header's credential scope, checking the scope's
/// region and service.
fn scope_key(header: &str) -> String {
    let rest = header
        .strip_prefix("AWS4-HMAC-SHA256 Credential=")
        .unwrap_or_else(|| panic!("not SigV4: {header}"));
    let credential = rest.split(',').next().unwrap_or("");
    let parts: Vec<&str> = credential.split('/').collect();
    assert_eq!(parts.len(), 5, "{header}");
    assert_eq!(
        &parts[2..],
        ["us-west-2", "bedrock", "aws4_request"],
        "{header}"
    );
    parts[0].to_owned()
}

/// Every Bedrock request was signed with `key` and carried `token-<key>`.
fn assert_signed_with(s: &Setup, key: &str) {
    let reqs = s.bedrock_requests();
    assert!(!reqs.is_empty(), "no Bedrock request");
    for r in &reqs {
        assert_eq!(scope_key(r.header("authorization").unwrap_or("")), key);
        assert_eq!(
            r.header("x-amz-security-token"),
            Some(format!("token-{key}").as_str()),
            "{r:?}"
        );
    }
}

fn assert_answered(messages: &[Value]) {
    assert!(!messages.is_empty());
    for m in messages {
        assert_eq!(m["stopReason"], "stop", "{m}");
    }
}

fn sts_actions(s: &Setup) -> Vec<String> {
    s.creds_requests("/sts")
        .iter()
        .filter_map(|r| {
            r.body
                .split('&')
                .find_map(|kv| kv.strip_prefix("Action=").map(str::to_owned))
        })
        .collect()
}

#[test]
fn bedrock_assume_role_profile_signs_sts_with_the_source_profile_keys() {
    let s = setup(1, 3600);
    s.aws_files(
        "[profile dev]\nrole_arn = arn:aws:iam::123456789012:role/pi\nsource_profile = base\n\
         role_session_name = pi-test\n",
        Some("[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = basesecret\n"),
    );
    s.signed_with(&[("AWS_PROFILE", "dev")], STS_ROLE_KEY);
    let sts = s.creds_requests("/sts");
    assert_eq!(sts.len(), 1, "{sts:?}");
    let auth = header(&sts[0], "authorization");
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDBASE/")
            && auth.contains("/us-west-2/sts/aws4_request"),
        "{auth}"
    );
    assert!(sts[0].body.contains("Action=AssumeRole"), "{}", sts[0].body);
    assert!(
        sts[0]
            .body
            .contains("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fpi"),
        "{}",
        sts[0].body
    );
    assert!(
        sts[0].body.contains("RoleSessionName=pi-test"),
        "{}",
        sts[0].body
    );
}

#[test]
fn bedrock_credential_source_ecs_container_assumes_a_role() {
    // `credential_source = EcsContainer`: the container's keys sign the AssumeRole call.
    let s = setup(1, 3600);
    s.aws_files(
        "[profile ci]\nrole_arn = arn:aws:iam::1:role/ci\ncredential_source = EcsContainer\n",
        None,
    );
    let full = format!("{}/ecs/creds", s.creds.base_url());
    s.signed_with(
        &[
            ("AWS_PROFILE", "ci"),
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &full),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", ECS_AUTH_TOKEN),
        ],
        STS_ROLE_KEY,
    );
    let sts = s.creds_requests("/sts");
    let auth = header(&sts[0], "authorization");
    assert!(auth.contains(&format!("Credential={ECS_KEY}/")), "{auth}");
    assert_eq!(
        header(&sts[0], "x-amz-security-token"),
        format!("token-{ECS_KEY}")
    );
}

#[test]
fn bedrock_web_identity_from_the_environment() {
    let s = setup(1, 3600);
    let token = s.root.path().join("web-identity-token");
    std::fs::write(&token, "eyJfake.jwt.token\n").unwrap();
    let token = token.to_string_lossy().into_owned();
    s.signed_with(
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", &token),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa"),
            ("AWS_ROLE_SESSION_NAME", "pod"),
        ],
        WEB_IDENTITY_KEY,
    );
    let sts = s.creds_requests("/sts").remove(0);
    assert!(
        sts.body.contains("Action=AssumeRoleWithWebIdentity"),
        "{}",
        sts.body
    );
    assert!(
        sts.body.contains("WebIdentityToken=eyJfake.jwt.token"),
        "{}",
        sts.body
    );
    assert!(
        !sts.headers.contains_key("authorization"),
        "unsigned: {:?}",
        sts.headers
    );
}

#[test]
fn bedrock_web_identity_from_a_profile() {
    let s = setup(1, 3600);
    let token = s.root.path().join("tok");
    std::fs::write(&token, "profile-jwt").unwrap();
    s.aws_files(
        &format!(
            "[default]\nweb_identity_token_file = {}\nrole_arn = arn:aws:iam::1:role/w\n",
            token.display()
        ),
        None,
    );
    // Upstream only offers Bedrock without keys when one of its marker variables is set
    // (AWS_PROFILE, the container or web identity variables); `default` names this profile.
    s.signed_with(&[("AWS_PROFILE", "default")], WEB_IDENTITY_KEY);
}

#[test]
fn bedrock_credential_process_profile() {
    let s = setup(1, 3600);
    let script = s.root.path().join("creds.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho '{\"Version\": 1, \"AccessKeyId\": \"ASIAPROCESS\", \
         \"SecretAccessKey\": \"ps\", \"SessionToken\": \"token-ASIAPROCESS\", \
         \"Expiration\": \"2999-01-01T00:00:00Z\"}'\n",
    )
    .unwrap();
    s.aws_files(
        &format!(
            "[profile proc]\ncredential_process = sh {}\n",
            script.display()
        ),
        None,
    );
    s.signed_with(&[("AWS_PROFILE", "proc")], "ASIAPROCESS");
}

/// Writes the SSO token cache file `aws sso login` leaves for `id` (session name or start URL).
fn sso_token(s: &Setup, id: &str, expires_at: &str) {
    sso_token_file(
        s,
        id,
        &json!({"accessToken": SSO_ACCESS_TOKEN, "expiresAt": expires_at, "region": "eu-west-1",
                "startUrl": "https://example.awsapps.com/start"}),
    );
}

/// Writes `token` as the SSO token cache file of `id`; its path.
fn sso_token_file(s: &Setup, id: &str, token: &Value) -> std::path::PathBuf {
    let out = std::process::Command::new("sha1sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(id.as_bytes())?;
            c.wait_with_output()
        })
        .expect("sha1sum");
    let hex = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned();
    assert_eq!(hex.len(), 40);
    let dir = s.root.home.join(".aws/sso/cache");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{hex}.json"));
    std::fs::write(&path, token.to_string()).unwrap();
    path
}

/// An `aws sso login` token with its client registration and refresh token, expiring at
/// `expires_at`, whose refresh token is `refresh`.
fn refreshable_token(expires_at: &str, refresh: &str) -> Value {
    json!({"startUrl": "https://example.awsapps.com/start", "region": "eu-west-1",
           "accessToken": SSO_ACCESS_TOKEN, "expiresAt": expires_at,
           "clientId": SSO_CLIENT_ID, "clientSecret": SSO_CLIENT_SECRET,
           "registrationExpiresAt": "2999-01-01T00:00:00Z", "refreshToken": refresh})
}

/// `YYYY-MM-DDTHH:MM:SSZ`, `secs` seconds from now.
fn iso_from_now(secs: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(secs))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

const SSO_CONFIG: &str = "[profile sso]\nsso_session = corp\nsso_account_id = 111122223333\n\
    sso_role_name = Dev\n\n[sso-session corp]\nsso_start_url = https://example.awsapps.com/start\n\
    sso_region = eu-west-1\n";

#[test]
fn bedrock_sso_session_profile_uses_the_cached_token() {
    let s = setup(1, 3600);
    s.aws_files(SSO_CONFIG, None);
    sso_token(&s, "corp", "2999-01-01T00:00:00Z");
    s.signed_with(&[("AWS_PROFILE", "sso")], SSO_KEY);
    let sso = s.creds_requests("/sso");
    assert_eq!(
        sso[0].path,
        "/sso/federation/credentials?account_id=111122223333&role_name=Dev"
    );
}

#[test]
fn bedrock_legacy_sso_profile_keys_the_cache_by_start_url() {
    let s = setup(1, 3600);
    s.aws_files(
        "[default]\nsso_start_url = https://legacy.awsapps.com/start\nsso_region = us-east-1\n\
         sso_account_id = 1\nsso_role_name = R\n",
        None,
    );
    sso_token(
        &s,
        "https://legacy.awsapps.com/start",
        "2999-01-01T00:00:00Z",
    );
    s.signed_with(&[("AWS_PROFILE", "default")], SSO_KEY);
}

#[test]
fn bedrock_expired_sso_token_says_to_run_aws_sso_login() {
    let s = setup(1, 3600);
    s.aws_files(SSO_CONFIG, None);
    sso_token(&s, "corp", "2020-01-01T00:00:00Z");
    let error = s.error_with(&[("AWS_PROFILE", "sso")]);
    assert!(error.contains("[sso]"), "{error}");
    assert!(error.contains("expired"), "{error}");
    assert!(error.contains("aws sso login --profile sso"), "{error}");
    assert!(
        s.creds.requests().is_empty(),
        "no portal call with an expired token"
    );
}

#[test]
fn bedrock_expired_sso_token_is_refreshed_through_sso_oidc_and_written_back() {
    let s = setup(1, 3600);
    s.aws_files(SSO_CONFIG, None);
    let path = sso_token_file(
        &s,
        "corp",
        &refreshable_token("2020-01-01T00:00:00Z", SSO_REFRESH_TOKEN),
    );
    let oidc = format!("{}/oidc", s.creds.base_url());
    s.signed_with(
        &[("AWS_PROFILE", "sso"), ("AWS_ENDPOINT_URL_SSO_OIDC", &oidc)],
        SSO_KEY,
    );
    // CreateToken with the refresh_token grant, then the portal with the new token.
    let calls = s.creds.requests();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        (calls[0].method.as_str(), calls[0].path.as_str()),
        ("POST", "/oidc/token")
    );
    let body: Value = serde_json::from_str(&calls[0].body).unwrap();
    assert_eq!(
        body,
        json!({"clientId": SSO_CLIENT_ID, "clientSecret": SSO_CLIENT_SECRET,
               "grantType": "refresh_token", "refreshToken": SSO_REFRESH_TOKEN})
    );
    assert!(calls[1].path.starts_with("/sso/federation/credentials"));
    assert_eq!(
        header(&calls[1], "x-amz-sso_bearer_token"),
        SSO_REFRESHED_ACCESS_TOKEN
    );
    // Written back as the SDK does: new access token, expiry and refresh token; the rest kept;
    // 2-space JSON in the original key order.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("{\n  \"startUrl\": "), "{text}");
    let written: Value = serde_json::from_str(&text).unwrap();
    let mut want = refreshable_token("", SSO_NEW_REFRESH_TOKEN);
    want["accessToken"] = json!(SSO_REFRESHED_ACCESS_TOKEN);
    want["expiresAt"] = written["expiresAt"].clone();
    assert_eq!(written, want);
    let expires = written["expiresAt"].as_str().unwrap_or("");
    assert_eq!(expires.len(), "2026-01-01T00:00:00.000Z".len(), "{expires}");
    let expires = chrono::DateTime::parse_from_rfc3339(expires).unwrap();
    let in_secs = (expires.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_seconds();
    assert!((28_000..=28_800).contains(&in_secs), "{in_secs}");
}

#[test]
fn bedrock_refused_sso_refresh_says_to_run_aws_sso_login() {
    // Expired, and CreateToken refuses the refresh token: the error, no portal call, the file
    // as it was.
    let s = setup(1, 3600);
    s.aws_files(SSO_CONFIG, None);
    let token = refreshable_token("2020-01-01T00:00:00Z", "revoked-refresh-token");
    let path = sso_token_file(&s, "corp", &token);
    let oidc = format!("{}/oidc", s.creds.base_url());
    let env = [("AWS_PROFILE", "sso"), ("AWS_ENDPOINT_URL_SSO_OIDC", &oidc)];
    let error = s.error_with(&env);
    assert!(error.contains("[sso]"), "{error}");
    assert!(error.contains("expired"), "{error}");
    assert!(error.contains("invalid_grant"), "{error}");
    assert!(error.contains("aws sso login --profile sso"), "{error}");
    let calls: Vec<String> = s.creds.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(calls, ["/oidc/token"]);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(kept, token);

    // Two minutes left (inside the five-minute refresh window) and the refresh refused: the
    // cached token is used while it lasts.
    let s = setup(1, 3600);
    s.aws_files(SSO_CONFIG, None);
    let token = refreshable_token(&iso_from_now(120), "revoked-refresh-token");
    sso_token_file(&s, "corp", &token);
    let oidc = format!("{}/oidc", s.creds.base_url());
    s.signed_with(
        &[("AWS_PROFILE", "sso"), ("AWS_ENDPOINT_URL_SSO_OIDC", &oidc)],
        SSO_KEY,
    );
    let calls = s.creds.requests();
    assert_eq!(calls[0].path, "/oidc/token");
    assert_eq!(
        header(&calls[1], "x-amz-sso_bearer_token"),
        SSO_ACCESS_TOKEN
    );
}

#[test]
fn bedrock_sso_token_without_refresh_fields_inside_the_window_is_an_error() {
    // The SDK only refreshes with clientId/clientSecret/refreshToken; without them a token
    // inside the refresh window is refused even before it expires.
    let s = setup(1, 3600);
    s.aws_files(SSO_CONFIG, None);
    sso_token(&s, "corp", &iso_from_now(120));
    let error = s.error_with(&[("AWS_PROFILE", "sso")]);
    assert!(error.contains("[sso]"), "{error}");
    assert!(error.contains("clientId"), "{error}");
    assert!(error.contains("aws sso login --profile sso"), "{error}");
    assert!(s.creds.requests().is_empty());
}

#[test]
fn bedrock_mfa_profile_is_an_error_naming_the_profile() {
    // Upstream passes the SDK no MFA code callback, so `mfa_serial` fails the profile.
    let s = setup(1, 3600);
    s.aws_files(
        "[profile dev]\nrole_arn = arn:aws:iam::1:role/admin\nsource_profile = base\n\
         mfa_serial = arn:aws:iam::1:mfa/me\n\
         [profile base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = x\n",
        None,
    );
    let error = s.error_with(&[("AWS_PROFILE", "dev")]);
    assert!(error.contains("[dev]"), "{error}");
    assert!(error.contains("multi-factor"), "{error}");
    assert!(error.contains("arn:aws:iam::1:mfa/me"), "{error}");
    assert!(s.creds_requests("/sts").is_empty());
}

#[test]
fn bedrock_sts_error_names_the_profile_and_the_role() {
    let s = setup(1, 3600);
    s.aws_files(
        "[profile dev]\nrole_arn = arn:aws:iam::1:role/denied\nsource_profile = base\n\
         [profile base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = x\n",
        None,
    );
    let error = s.error_with(&[("AWS_PROFILE", "dev")]);
    assert!(error.contains("[dev]"), "{error}");
    assert!(error.contains("arn:aws:iam::1:role/denied"), "{error}");
    assert!(error.contains("AccessDenied"), "{error}");
}

#[test]
fn bedrock_container_credentials_with_a_token_file() {
    let s = setup(1, 3600);
    let token = s.root.path().join("ecs-token");
    std::fs::write(&token, format!("{ECS_AUTH_TOKEN}\n")).unwrap();
    let token = token.to_string_lossy().into_owned();
    let full = format!("{}/ecs/creds", s.creds.base_url());
    s.signed_with(
        &[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &full),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &token),
        ],
        ECS_KEY,
    );
}

#[test]
fn bedrock_instance_metadata_v2() {
    let s = setup(1, 3600);
    let imds = format!("{}/imds", s.creds.base_url());
    // AWS_PROFILE names a profile that does not exist (upstream needs one of its marker
    // variables to offer Bedrock at all): the chain goes on to instance metadata.
    s.signed_with(
        &[
            ("AWS_PROFILE", "default"),
            ("AWS_EC2_METADATA_DISABLED", "false"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds),
        ],
        IMDS_KEY,
    );
    let calls: Vec<String> = s
        .creds
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        calls,
        [
            "PUT /imds/latest/api/token",
            "GET /imds/latest/meta-data/iam/security-credentials/",
            "GET /imds/latest/meta-data/iam/security-credentials/pi-role",
        ]
    );
    let put = &s.creds.requests()[0];
    assert_eq!(
        put.headers
            .get("x-aws-ec2-metadata-token-ttl-seconds")
            .map(String::as_str),
        Some("21600")
    );
}

#[test]
fn bedrock_disabled_instance_metadata_means_no_credentials() {
    let s = setup(1, 3600);
    let imds = format!("{}/imds", s.creds.base_url());
    let error = s.error_with(&[
        ("AWS_PROFILE", "default"),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds),
    ]);
    assert_eq!(error, "Could not load credentials from any providers");
    assert!(s.creds.requests().is_empty());
}

#[test]
fn bedrock_chain_order() {
    // Environment keys beat the profile (upstream hands them to the client explicitly).
    let s = setup(1, 3600);
    s.aws_files(
        "[profile dev]\nrole_arn = arn:aws:iam::1:role/pi\nsource_profile = dev\n\
         aws_access_key_id = AKIDDEV\naws_secret_access_key = x\n",
        None,
    );
    let msgs = s.run(
        &[
            ("AWS_PROFILE", "dev"),
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "e"),
        ],
        1,
    );
    assert_answered(&msgs);
    let reqs = s.bedrock_requests();
    assert_eq!(
        scope_key(reqs[0].header("authorization").unwrap_or("")),
        "AKIDENV"
    );
    assert!(s.creds.requests().is_empty());

    // In a profile, assume-role comes before the static keys beside it (the source profile is
    // itself, whose static keys sign STS).
    let s = setup(1, 3600);
    s.aws_files(
        "[profile dev]\nrole_arn = arn:aws:iam::1:role/pi\nsource_profile = dev\n\
         aws_access_key_id = AKIDDEV\naws_secret_access_key = x\n",
        None,
    );
    s.signed_with(&[("AWS_PROFILE", "dev")], STS_ROLE_KEY);

    // A profile beats web identity and container variables; web identity beats the container.
    let s = setup(2, 3600);
    let token = s.root.path().join("tok");
    std::fs::write(&token, "jwt").unwrap();
    let token = token.to_string_lossy().into_owned();
    let full = format!("{}/ecs/creds", s.creds.base_url());
    s.aws_files(SSO_CONFIG, None);
    sso_token(&s, "corp", "2999-01-01T00:00:00Z");
    let env = [
        ("AWS_PROFILE", "sso"),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.as_str()),
        ("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa"),
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", full.as_str()),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN", ECS_AUTH_TOKEN),
    ];
    assert_answered(&s.run(&env, 1));
    assert_eq!(
        scope_key(
            s.bedrock_requests()[0]
                .header("authorization")
                .unwrap_or("")
        ),
        SSO_KEY
    );
    // The same variables without AWS_PROFILE (the `default` profile does not exist): web
    // identity.
    assert_answered(
        &s.run(
            &env[..0]
                .iter()
                .chain(&env[1..])
                .copied()
                .collect::<Vec<_>>(),
            1,
        ),
    );
    assert_eq!(
        scope_key(
            s.bedrock_requests()[1]
                .header("authorization")
                .unwrap_or("")
        ),
        WEB_IDENTITY_KEY
    );

    // Container before instance metadata.
    let s = setup(1, 3600);
    let imds = format!("{}/imds", s.creds.base_url());
    let full = format!("{}/ecs/creds", s.creds.base_url());
    s.signed_with(
        &[
            ("AWS_EC2_METADATA_DISABLED", "false"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds),
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &full),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", ECS_AUTH_TOKEN),
        ],
        ECS_KEY,
    );
    assert!(s
        .creds
        .requests()
        .iter()
        .all(|r| r.path.starts_with("/ecs")));
}

#[test]
fn bedrock_temporary_credentials_are_cached_until_five_minutes_before_expiry() {
    // An hour of validity: three prompts, one AssumeRole.
    let s = setup(3, 3600);
    s.aws_files(
        "[profile dev]\nrole_arn = arn:aws:iam::1:role/pi\nsource_profile = base\n\
         [profile base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = x\n",
        None,
    );
    assert_answered(&s.run(&[("AWS_PROFILE", "dev")], 3));
    assert_eq!(s.bedrock_requests().len(), 3);
    assert_eq!(sts_actions(&s), ["AssumeRole"]);

    // Four minutes of validity is inside the refresh margin: fetched anew for every request.
    let s = setup(3, 240);
    s.aws_files(
        "[profile dev]\nrole_arn = arn:aws:iam::1:role/pi\nsource_profile = base\n\
         [profile base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = x\n",
        None,
    );
    assert_answered(&s.run(&[("AWS_PROFILE", "dev")], 3));
    assert_eq!(sts_actions(&s), ["AssumeRole", "AssumeRole", "AssumeRole"]);
}

#[test]
fn bedrock_strict_tool_limit_falls_back_to_non_strict_tools() {
    // A Claude model with `supportsStrictMode`: the built-in tools go strict. Bedrock rejects
    // them for the strict-tool limits; the same request is sent once more without `strict`,
    // and the session's next request is non-strict from the start.
    let script = Script::new([
        Turn::text("unused").error_body(
            400,
            json!({"message": "Too many strict tools (21). The maximum number of strict tools is 20."}),
        )
        .error_header("x-amzn-errortype", "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
        Turn::text("Non-strict answer."),
        Turn::text("Second answer."),
    ]);
    let fake = FakeLlm::spawn(script).expect("fake");
    let root = RunRoot::new(fake.port());
    root.write_agent_file(
        "models.json",
        &json!({"providers": {"amazon-bedrock": {
            "baseUrl": format!("http://127.0.0.1:{}/bedrock", fake.port())}}}),
    );
    root.write_agent_file(
        "settings.json",
        &json!({"defaultProvider": "amazon-bedrock",
                "defaultModel": "anthropic.claude-haiku-4-5-20251001-v1:0",
                "defaultThinkingLevel": "off", "retry": {"enabled": false}}),
    );
    let mut agent = root.spawn_with_env(
        true,
        &[],
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDX"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_REGION", "us-west-2"),
        ],
    );
    for (i, want) in ["Non-strict answer.", "Second answer."].iter().enumerate() {
        let from = agent.len();
        let r =
            agent.request(json!({"id": format!("p{i}"), "type": "prompt", "message": "Hello?"}));
        assert_eq!(r["success"], true, "{r}");
        agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
        let r = agent.request(json!({"id": format!("t{i}"), "type": "get_last_assistant_text"}));
        assert_eq!(r["data"]["text"], *want, "{r}");
    }
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 3);
    let strict = |r: &pi_fakellm::RecordedRequest| -> Vec<String> {
        r.body["toolConfig"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|t| t["toolSpec"]["strict"] == true)
            .filter_map(|t| t["toolSpec"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(strict(&reqs[0]), ["read", "bash", "edit", "write"]);
    assert!(strict(&reqs[1]).is_empty(), "{}", reqs[1].body_text());
    assert!(strict(&reqs[2]).is_empty(), "{}", reqs[2].body_text());
    // The fallback sends the tools' own schemas, the rest of the body unchanged.
    let mut a = reqs[0].body.clone();
    let b = reqs[1].body.clone();
    a["toolConfig"] = b["toolConfig"].clone();
    assert_eq!(a, b);
    let read = &reqs[1].body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"];
    assert!(read.get("additionalProperties").is_none(), "{read}");
}

#[test]
fn bedrock_other_validation_errors_are_not_retried_without_strict() {
    let script = Script::new([Turn::text("unused")
        .error_body(
            400,
            json!({"message": "Malformed input request: something else"}),
        )
        .error_header("x-amzn-errortype", "ValidationException")]);
    let fake = FakeLlm::spawn(script).expect("fake");
    let root = RunRoot::new(fake.port());
    root.write_agent_file(
        "models.json",
        &json!({"providers": {"amazon-bedrock": {
            "baseUrl": format!("http://127.0.0.1:{}/bedrock", fake.port())}}}),
    );
    root.write_agent_file(
        "settings.json",
        &json!({"defaultProvider": "amazon-bedrock",
                "defaultModel": "anthropic.claude-haiku-4-5-20251001-v1:0",
                "defaultThinkingLevel": "off", "retry": {"enabled": false}}),
    );
    let mut agent = root.spawn_with_env(
        false,
        &[],
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDX"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
        ],
    );
    agent.prompt_settled("p", "Hello?");
    assert_eq!(fake.llm_requests().len(), 1);
}
