//! The client's `mcpServers` of `session/new`, `session/load` and `session/resume`: stdio and
//! streamable-HTTP servers, started for that session through pi's MCP client
//! ([`crate::mcp::McpManager::for_session`]) beside the servers of `mcp.json`, their tools
//! declared to the model as `direct` tools (`mcp__<server>__<tool>`) of that session only, and
//! stopped when the session closes. SSE servers and MCP-over-ACP are not supported (and not
//! announced in `initialize`); such entries are skipped with a note on stderr.

use crate::mcp::config::{self, Exposure, ServerConfig};
use crate::mcp::{McpManager, ToolFilter};
use agent_client_protocol::v1::schema::McpServer;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::Arc;

/// Where the client's servers say they come from (`ServerConfig::source`, in `/mcp` output).
const SOURCE: &str = "acp:mcpServers";

/// The client's servers as pi server configs, `direct` exposure: each ACP entry as the
/// `mcp.json` entry it stands for (stdio `command`/`args`/`env`, http `url`/`headers`),
/// checked by [`config::validate`]. A name outside `[A-Za-z0-9_-]` has those characters
/// replaced by `_`. An entry that is invalid, of an unsupported transport (SSE, ACP), or whose
/// namespace an earlier entry took is skipped with a warning on stderr.
pub(super) fn client_servers(servers: &[McpServer]) -> Vec<ServerConfig> {
    let mut out: Vec<ServerConfig> = Vec::new();
    for server in servers {
        let (name, entry) = match server {
            McpServer::Stdio(s) => {
                let env: Map<String, Value> = s
                    .env
                    .iter()
                    .map(|e| (e.name.clone(), Value::String(e.value.clone())))
                    .collect();
                (
                    s.name.as_str(),
                    json!({
                        "command": s.command.to_string_lossy(),
                        "args": s.args,
                        "env": env,
                    }),
                )
            }
            McpServer::Http(h) => {
                let headers: Map<String, Value> = h
                    .headers
                    .iter()
                    .map(|e| (e.name.clone(), Value::String(e.value.clone())))
                    .collect();
                (
                    h.name.as_str(),
                    json!({"type": "http", "url": h.url, "headers": headers}),
                )
            }
            McpServer::Sse(s) => {
                warn(&s.name, "SSE servers are not supported");
                continue;
            }
            _ => {
                warn("?", "this MCP transport is not supported");
                continue;
            }
        };
        let name = sanitize(name);
        let mut entry = entry;
        entry["exposure"] = Value::String(Exposure::Direct.as_str().into());
        match config::validate(&name, &entry, Path::new(SOURCE), "client") {
            Ok(cfg) => {
                let ns = config::namespace(&cfg.name);
                if out.iter().any(|o| config::namespace(&o.name) == ns) {
                    warn(&name, "another server of the session has that name");
                    continue;
                }
                out.push(cfg);
            }
            Err(e) => warn(&name, &e),
        }
    }
    out
}

/// The MCP servers of one session: the process's (`base`, shared) and the client's `servers`
/// (owned, connecting now). `None` when there are none at all.
pub(super) fn session_manager(
    base: Option<&Arc<McpManager>>,
    servers: &[McpServer],
    cwd: &Path,
    agent_dir: &Path,
    filter: &ToolFilter,
) -> Option<Arc<McpManager>> {
    let own = client_servers(servers);
    if own.is_empty() {
        return None;
    }
    Some(McpManager::for_session(
        base,
        own,
        cwd,
        agent_dir,
        filter.clone(),
    ))
}

/// `[A-Za-z0-9_-]` kept, anything else `_`; an empty name is `server`.
fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "server".into()
    } else {
        s
    }
}

fn warn(name: &str, why: &str) {
    crate::config::warn(&format!(
        "MCP: the client's server \"{name}\" is skipped: {why}"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        EnvVariable, HttpHeader, McpServerHttp, McpServerSse, McpServerStdio,
    };

    #[test]
    fn entries_become_direct_server_configs() {
        let servers = vec![
            McpServer::Stdio(
                McpServerStdio::new("my files", "/bin/fs-server")
                    .args(vec!["--root".into(), "/tmp".into()])
                    .env(vec![EnvVariable::new("K", "V")]),
            ),
            McpServer::Http(
                McpServerHttp::new("web", "https://example.com/mcp")
                    .headers(vec![HttpHeader::new("Authorization", "Bearer x")]),
            ),
            McpServer::Sse(McpServerSse::new("old", "https://example.com/sse")),
            McpServer::Stdio(McpServerStdio::new("my-files", "/bin/other")),
            McpServer::Http(McpServerHttp::new("bad", "ftp://example.com")),
        ];
        let cfgs = client_servers(&servers);
        let names: Vec<&str> = cfgs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["my_files", "web"]);
        assert!(cfgs.iter().all(|c| c.exposure == Exposure::Direct));
        match &cfgs[0].transport {
            config::Transport::Stdio {
                command, args, env, ..
            } => {
                assert_eq!(command, "/bin/fs-server");
                assert_eq!(args, &["--root", "/tmp"]);
                assert_eq!(env.get("K").map(String::as_str), Some("V"));
            }
            other => panic!("{other:?}"),
        }
        match &cfgs[1].transport {
            config::Transport::Http { url, headers } => {
                assert_eq!(url, "https://example.com/mcp");
                assert_eq!(
                    headers.get("Authorization").map(String::as_str),
                    Some("Bearer x")
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
