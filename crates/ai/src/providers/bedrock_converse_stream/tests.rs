//! Unit tests of the Bedrock ConverseStream adapter.

use super::env::ini_section;
use super::response::{exception_name, rejoin_base64};
use super::send::{http_error_message, ErrorAnswer};
use super::*;
use crate::env_keys::AUTHENTICATED_MARKER;

fn model(id: &str, base_url: &str) -> Model {
    let mut m = crate::models::builtin_models()
        .into_iter()
        .find(|m| m.provider == "amazon-bedrock")
        .unwrap_or_else(|| panic!("no bedrock model"));
    m.id = id.to_owned();
    m.name = String::new();
    m.base_url = base_url.to_owned();
    m
}

#[test]
fn endpoints_and_regions() {
    let std_url = "https://bedrock-runtime.us-east-1.amazonaws.com";
    let env = AwsEnv::from_pairs([]);
    let e = resolve_endpoint(&model("a", std_url), &env);
    assert_eq!(
        (e.endpoint.as_str(), e.region.as_str()),
        (std_url, "us-east-1")
    );
    let env = AwsEnv::from_pairs([("AWS_REGION", "eu-west-1")]);
    let e = resolve_endpoint(&model("a", std_url), &env);
    assert_eq!(
        e.endpoint,
        "https://bedrock-runtime.eu-west-1.amazonaws.com"
    );
    let env = AwsEnv::from_pairs([
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:9/x/"),
    ]);
    let e = resolve_endpoint(&model("a", std_url), &env);
    assert_eq!(e.endpoint, "http://127.0.0.1:9/x");
    let e = resolve_endpoint(&model("a", "http://127.0.0.1:9/bedrock"), &env);
    assert_eq!(
        (e.endpoint.as_str(), e.region.as_str()),
        ("http://127.0.0.1:9/bedrock", "eu-west-1")
    );
    let arn = "arn:aws:bedrock:ap-south-1:123:inference-profile/x";
    assert_eq!(
        resolve_endpoint(&model(arn, std_url), &env).region,
        "ap-south-1"
    );
    assert_eq!(
        converse_stream_url("http://h", "amazon.nova-lite-v1:0"),
        "http://h/model/amazon.nova-lite-v1%3A0/converse-stream"
    );
}

#[test]
fn credentials_order() {
    let env = AwsEnv::from_pairs([
        ("AWS_BEARER_TOKEN_BEDROCK", "tok"),
        ("AWS_ACCESS_KEY_ID", "id"),
        ("AWS_SECRET_ACCESS_KEY", "s"),
    ]);
    assert_eq!(
        BedrockAuth::resolve_direct(Some(AUTHENTICATED_MARKER), &env),
        Some(BedrockAuth::Bearer("tok".into()))
    );
    let env = AwsEnv::from_pairs([("AWS_ACCESS_KEY_ID", "id"), ("AWS_SECRET_ACCESS_KEY", "s")]);
    assert!(matches!(
        BedrockAuth::resolve_direct(None, &env),
        Some(BedrockAuth::SigV4(k)) if k.access_key_id == "id" && k.session_token.is_none()
    ));
    assert_eq!(
        BedrockAuth::resolve_direct(None, &AwsEnv::from_pairs([])),
        None
    );
    let ini = "[default]\naws_access_key_id = A\n\n[profile dev]\nregion = eu-north-1\n";
    let s = ini_section(ini, "profile dev").unwrap_or_default();
    assert_eq!(s.get("region").map(String::as_str), Some("eu-north-1"));
}

#[test]
fn frames_roundtrip_and_crc() {
    // A message built by hand: one string header, payload `{}`.
    let mut head = vec![11u8];
    head.extend_from_slice(b":event-type");
    head.push(7);
    head.extend_from_slice(&4u16.to_be_bytes());
    head.extend_from_slice(b"ping");
    let payload = b"{}";
    let total = 12 + head.len() + payload.len() + 4;
    let mut msg = Vec::new();
    msg.extend_from_slice(&(total as u32).to_be_bytes());
    msg.extend_from_slice(&(head.len() as u32).to_be_bytes());
    let c = crc32fast::hash(&msg);
    msg.extend_from_slice(&c.to_be_bytes());
    msg.extend_from_slice(&head);
    msg.extend_from_slice(payload);
    let c = crc32fast::hash(&msg);
    msg.extend_from_slice(&c.to_be_bytes());
    let mut d = EventStreamDecoder::default();
    d.push(&msg[..10]);
    assert_eq!(d.next_frame(), Ok(None));
    d.push(&msg[10..]);
    let f = d
        .next_frame()
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("frame"));
    assert_eq!(f.header(":event-type"), Some("ping"));
    assert_eq!(f.payload, b"{}");
    let mut bad = msg.clone();
    let n = bad.len();
    bad[n - 6] ^= 1;
    let mut d = EventStreamDecoder::default();
    d.push(&bad);
    assert_eq!(d.next_frame(), Err(FrameError::MessageCrc));
}

#[test]
fn error_texts() {
    let text = |status, error_type, body| {
        http_error_message(status, &ErrorAnswer::parse(error_type, body), body)
    };
    assert_eq!(
        text(
            429,
            Some("ThrottlingException:http://internal.amazon.com/"),
            r#"{"message":"Too many requests"}"#
        ),
        "Throttling error: Too many requests"
    );
    assert_eq!(
        text(403, Some("AccessDeniedException"), r#"{"message":"no"}"#),
        "AccessDeniedException: no"
    );
    assert_eq!(
        text(
            400,
            None,
            r#"{"__type":"com.amazon#ValidationException","Message":"m"}"#
        ),
        "Validation error: m"
    );
    assert_eq!(text(502, None, "bad gateway"), "502: bad gateway");
    let env = AwsEnv::from_pairs([("AWS_BEDROCK_FORCE_HTTP1", "1")]);
    assert!(force_http1(&env));
    assert!(!force_http1(&AwsEnv::from_pairs([(
        "AWS_BEDROCK_FORCE_HTTP1",
        "true"
    )])));
    assert_eq!(exception_name("validationException"), "ValidationException");
    assert_eq!(rejoin_base64("AAE=AgM="), "AAECAw==");
}
