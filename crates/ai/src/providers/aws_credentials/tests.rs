//! Unit tests of the AWS credential chain.

use super::metadata::check_container_uri;
use super::profiles::ini_sections;
use super::wire::{form_encode, iso8601_millis, parse_iso8601, xml_text};
use super::*;
use std::time::UNIX_EPOCH;

#[test]
fn iso_times_and_xml() {
    assert_eq!(
        parse_iso8601("1970-01-02T00:00:01Z"),
        Some(UNIX_EPOCH + Duration::from_secs(86_401))
    );
    assert_eq!(
        parse_iso8601("2001-09-09T01:46:40.123+00:00"),
        Some(UNIX_EPOCH + Duration::from_millis(1_000_000_000_123))
    );
    assert_eq!(
        parse_iso8601("2001-09-09T03:46:40+02:00"),
        Some(UNIX_EPOCH + Duration::from_secs(1_000_000_000))
    );
    assert_eq!(parse_iso8601("yesterday"), None);
    assert_eq!(
        iso8601_millis(UNIX_EPOCH + Duration::from_millis(1_000_000_000_007)),
        "2001-09-09T01:46:40.007Z"
    );
    let xml = "<R><Credentials><AccessKeyId>A&amp;B</AccessKeyId></Credentials></R>";
    assert_eq!(xml_text(xml, "AccessKeyId").as_deref(), Some("A&B"));
    assert_eq!(
        form_encode(&[("RoleArn", "arn:aws:iam::1:role/x y".into())]),
        "RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx+y"
    );
}

#[test]
fn shared_files_merge_and_container_uris() {
    let s = ini_sections(
        "[profile a]\nrole_arn = r\ns3 =\n  max = 1\n[sso-session s]\nsso_region = x\n",
    );
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].1.get("role_arn").map(String::as_str), Some("r"));
    assert!(!s[0].1.contains_key("max"));
    assert!(check_container_uri("http://127.0.0.1:9/creds").is_ok());
    assert!(check_container_uri("https://example.com/creds").is_ok());
    assert!(check_container_uri("http://example.com/creds").is_err());
}
