//! Amazon Bedrock credentials beyond static keys (issue 14), end to end: `pi --mode rpc`
//! against the fake ConverseStream wire, with the AWS credential endpoints faked on 127.0.0.1
//! (`pi_fakellm::wire_aws_creds`: STS, SSO portal, container, instance metadata). Each test
//! checks that the Bedrock request's SigV4 credential scope names the access key that source
//! returned, and that its session token went along (`x-amz-security-token`); then the chain's
//! order, the in-process cache of temporary credentials, errors naming the profile, and the
//! strict-tool-limit fallback.

use crate::common::*;
use pi_fakellm::wire_aws_creds::{
    AwsCredsServer, ECS_AUTH_TOKEN, ECS_KEY, IMDS_KEY, SSO_ACCESS_TOKEN, SSO_KEY, STS_ROLE_KEY,
    WEB_IDENTITY_KEY,
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
    s.creds
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/sts"))
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
    let msgs = s.run(&[("AWS_PROFILE", "dev")], 1);
    assert_answered(&msgs);
    assert_signed_with(&s, STS_ROLE_KEY);
    let sts: Vec<_> = s
        .creds
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/sts"))
        .collect();
    assert_eq!(sts.len(), 1, "{sts:?}");
    let auth = sts[0]
        .headers
        .get("authorization")
        .cloned()
        .unwrap_or_default();
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
    let msgs = s.run(
        &[
            ("AWS_PROFILE", "ci"),
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &full),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", ECS_AUTH_TOKEN),
        ],
        1,
    );
    assert_answered(&msgs);
    assert_signed_with(&s, STS_ROLE_KEY);
    let sts = s
        .creds
        .requests()
        .into_iter()
        .find(|r| r.path.starts_with("/sts"))
        .expect("an STS call");
    let auth = sts
        .headers
        .get("authorization")
        .cloned()
        .unwrap_or_default();
    assert!(auth.contains(&format!("Credential={ECS_KEY}/")), "{auth}");
    assert_eq!(
        sts.headers.get("x-amz-security-token").map(String::as_str),
        Some(format!("token-{ECS_KEY}").as_str())
    );
}

#[test]
fn bedrock_web_identity_from_the_environment() {
    let s = setup(1, 3600);
    let token = s.root.path().join("web-identity-token");
    std::fs::write(&token, "eyJfake.jwt.token\n").unwrap();
    let token = token.to_string_lossy().into_owned();
    let msgs = s.run(
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", &token),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa"),
            ("AWS_ROLE_SESSION_NAME", "pod"),
        ],
        1,
    );
    assert_answered(&msgs);
    assert_signed_with(&s, WEB_IDENTITY_KEY);
    let sts = s
        .creds
        .requests()
        .into_iter()
        .find(|r| r.path.starts_with("/sts"))
        .expect("an STS call");
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
    let msgs = s.run(&[("AWS_PROFILE", "default")], 1);
    assert_answered(&msgs);
    assert_signed_with(&s, WEB_IDENTITY_KEY);
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
    let msgs = s.run(&[("AWS_PROFILE", "proc")], 1);
    assert_answered(&msgs);
    assert_signed_with(&s, "ASIAPROCESS");
}

/// Writes the SSO token cache file `aws sso login` leaves for `id` (session name or start URL).
fn sso_token(s: &Setup, id: &str, expires_at: &str) {
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
    std::fs::write(
        dir.join(format!("{hex}.json")),
        json!({"accessToken": SSO_ACCESS_TOKEN, "expiresAt": expires_at, "region": "eu-west-1",
               "startUrl": "https://example.awsapps.com/start"})
        .to_string(),
    )
    .unwrap();
}

const SSO_CONFIG: &str = "[profile sso]\nsso_session = corp\nsso_account_id = 111122223333\n\
    sso_role_name = Dev\n\n[sso-session corp]\nsso_start_url = https://example.awsapps.com/start\n\
    sso_region = eu-west-1\n";

#[test]
fn bedrock_sso_session_profile_uses_the_cached_token() {
    let s = setup(1, 3600);
    s.aws_files(SSO_CONFIG, None);
    sso_token(&s, "corp", "2999-01-01T00:00:00Z");
    let msgs = s.run(&[("AWS_PROFILE", "sso")], 1);
    assert_answered(&msgs);
    assert_signed_with(&s, SSO_KEY);
    let sso = s
        .creds
        .requests()
        .into_iter()
        .find(|r| r.path.starts_with("/sso"))
        .expect("an SSO call");
    assert_eq!(
        sso.path,
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
    let msgs = s.run(&[("AWS_PROFILE", "default")], 1);
    assert_answered(&msgs);
    assert_signed_with(&s, SSO_KEY);
}

#[test]
fn bedrock_expired_sso_token_says_to_run_aws_sso_login() {
    let s = setup(1, 3600);
    s.aws_files(SSO_CONFIG, None);
    sso_token(&s, "corp", "2020-01-01T00:00:00Z");
    let msgs = s.run(&[("AWS_PROFILE", "sso")], 1);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["stopReason"], "error", "{}", msgs[0]);
    let error = msgs[0]["errorMessage"].as_str().unwrap_or("");
    assert!(error.contains("[sso]"), "{error}");
    assert!(error.contains("expired"), "{error}");
    assert!(error.contains("aws sso login --profile sso"), "{error}");
    assert!(s.bedrock_requests().is_empty());
    assert!(
        s.creds.requests().is_empty(),
        "no portal call with an expired token"
    );
}

#[test]
fn bedrock_sts_error_names_the_profile_and_the_role() {
    let s = setup(1, 3600);
    s.aws_files(
        "[profile dev]\nrole_arn = arn:aws:iam::1:role/denied\nsource_profile = base\n\
         [profile base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = x\n",
        None,
    );
    let msgs = s.run(&[("AWS_PROFILE", "dev")], 1);
    let error = msgs[0]["errorMessage"].as_str().unwrap_or("");
    assert_eq!(msgs[0]["stopReason"], "error");
    assert!(error.contains("[dev]"), "{error}");
    assert!(error.contains("arn:aws:iam::1:role/denied"), "{error}");
    assert!(error.contains("AccessDenied"), "{error}");
    assert!(s.bedrock_requests().is_empty());
}

#[test]
fn bedrock_container_credentials_with_a_token_file() {
    let s = setup(1, 3600);
    let token = s.root.path().join("ecs-token");
    std::fs::write(&token, format!("{ECS_AUTH_TOKEN}\n")).unwrap();
    let token = token.to_string_lossy().into_owned();
    let full = format!("{}/ecs/creds", s.creds.base_url());
    let msgs = s.run(
        &[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &full),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &token),
        ],
        1,
    );
    assert_answered(&msgs);
    assert_signed_with(&s, ECS_KEY);
}

#[test]
fn bedrock_instance_metadata_v2() {
    let s = setup(1, 3600);
    let imds = format!("{}/imds", s.creds.base_url());
    // AWS_PROFILE names a profile that does not exist (upstream needs one of its marker
    // variables to offer Bedrock at all): the chain goes on to instance metadata.
    let msgs = s.run(
        &[
            ("AWS_PROFILE", "default"),
            ("AWS_EC2_METADATA_DISABLED", "false"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds),
        ],
        1,
    );
    assert_answered(&msgs);
    assert_signed_with(&s, IMDS_KEY);
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
    let msgs = s.run(
        &[
            ("AWS_PROFILE", "default"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds),
        ],
        1,
    );
    assert_eq!(msgs[0]["stopReason"], "error");
    assert_eq!(
        msgs[0]["errorMessage"],
        "Could not load credentials from any providers"
    );
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
    let msgs = s.run(&[("AWS_PROFILE", "dev")], 1);
    assert_answered(&msgs);
    assert_signed_with(&s, STS_ROLE_KEY);

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
    let msgs = s.run(
        &[
            ("AWS_EC2_METADATA_DISABLED", "false"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds),
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &full),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", ECS_AUTH_TOKEN),
        ],
        1,
    );
    assert_answered(&msgs);
    assert_signed_with(&s, ECS_KEY);
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
    let from = agent.len();
    let r = agent.request(json!({"id": "p", "type": "prompt", "message": "Hello?"}));
    assert_eq!(r["success"], true, "{r}");
    agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    assert_eq!(fake.llm_requests().len(), 1);
}
