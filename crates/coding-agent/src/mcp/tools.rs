//! The tools the model calls to reach MCP servers: one [`McpTool`] per `direct` server tool
//! (named `mcp__<server>__<tool>`, declared like a built-in tool) and the resource tools
//! `list_mcp_resources`, `list_mcp_resource_templates`, `read_mcp_resource` (docs/mcp.md
//! "Control tool exposure", "Use resources").
//!
//! A call that cannot reach its server (failed to start, timed out, answered garbage) is an
//! error result the model sees: `MCP server "<name>": <reason>`; a server that died mid-call
//! gives `MCP connection closed`, as upstream, and the next call reconnects.

use super::client::McpError;
use super::convert::{convert_call_result, limit_content, resource_to_content};
use super::manager::{McpManager, ServerSlot};
use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::{Content, ToolDefinition};
use serde_json::{json, Map, Value};
use sha2::Digest;
use std::sync::{Arc, Weak};

/// Provider tool names are at most 64 characters of `[A-Za-z0-9_-]`.
const MAX_TOOL_NAME: usize = 64;

/// `mcp__<server>__<tool>` with every character but `[A-Za-z0-9_]` replaced by `_`; when longer
/// than 64 characters or `hashed`, cut to 55 characters plus `_` and the first 8 hex digits of
/// sha256(`server\0tool`) (upstream pi-mcp `createMcpToolName`).
pub fn mcp_tool_name(server: &str, tool: &str, hashed: bool) -> String {
    let name: String = format!("mcp__{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() <= MAX_TOOL_NAME && !hashed {
        return name;
    }
    let digest = sha2::Sha256::digest(format!("{server}\0{tool}").as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = MAX_TOOL_NAME - hash.len() - 1;
    format!("{}_{hash}", &name[..keep.min(name.len())])
}

/// The input schema as declared to the model: the server's, with `type: "object"` and
/// `properties: {}` filled in when missing (upstream `normalizeMcpInputSchema`).
fn normalize_schema(schema: Option<&Value>) -> Value {
    let mut m: Map<String, Value> = schema
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    m.entry("type").or_insert_with(|| json!("object"));
    m.entry("properties").or_insert_with(|| json!({}));
    Value::Object(m)
}

/// `MCP connection closed` as upstream for a dropped connection, else
/// `MCP server "<name>": <reason>`.
fn server_error(server: &str, e: &McpError) -> ToolError {
    match e {
        McpError::Closed => ToolError::Failed(e.to_string()),
        _ => ToolError::Failed(format!("MCP server \"{server}\": {e}")),
    }
}

/// Runs `f` against `slot` through [`ServerSlot::request`] (reconnect first when needed; a
/// `read_only` request is retried once after a transient HTTP failure; a dropped transport
/// marks the server disconnected).
async fn with_server<T, F, Fut>(
    slot: &Arc<ServerSlot>,
    ctx: &ToolContext,
    read_only: bool,
    f: F,
) -> Result<T, ToolError>
where
    F: Fn(super::client::Peer) -> Fut,
    Fut: std::future::Future<Output = Result<T, McpError>>,
{
    let name = &slot.cfg.name;
    let result = tokio::select! {
        r = slot.request(read_only, f) => r,
        _ = ctx.cancel.cancelled() => return Err(ToolError::Aborted),
    };
    result.map_err(|e| server_error(name, &e))
}

/// One server tool declared directly.
pub struct McpTool {
    slot: Arc<ServerSlot>,
    name: String,
    tool: Value,
}

impl McpTool {
    /// `tool` is the server's `tools/list` entry; `name` its model-facing name.
    pub fn new(slot: Arc<ServerSlot>, name: String, tool: Value) -> Self {
        McpTool { slot, name, tool }
    }

    fn server_tool_name(&self) -> &str {
        self.tool.get("name").and_then(Value::as_str).unwrap_or("")
    }
}

#[async_trait]
impl AgentTool for McpTool {
    fn definition(&self) -> ToolDefinition {
        let server = &self.slot.cfg.name;
        let tool = self.server_tool_name();
        let description = self
            .tool
            .get("description")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .or_else(|| self.tool.get("title").and_then(Value::as_str))
            .or_else(|| {
                self.tool
                    .get("annotations")
                    .and_then(|a| a.get("title"))
                    .and_then(Value::as_str)
            })
            .map(str::to_string)
            .unwrap_or_else(|| format!("MCP tool {tool} from server {server}"));
        ToolDefinition {
            name: self.name.clone(),
            description,
            parameters: normalize_schema(self.tool.get("inputSchema")),
        }
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let tool = self.server_tool_name().to_string();
        let args = if args.is_null() { json!({}) } else { args };
        let result = with_server(&self.slot, &ctx, false, |peer| {
            let (tool, args) = (tool.clone(), args.clone());
            async move { peer.call_tool(&tool, args).await }
        })
        .await?;
        let readable = self.slot.has_resources();
        Ok(convert_call_result(
            &self.slot.cfg.name,
            self.server_tool_name(),
            &result,
            readable,
        ))
    }
}

/// Which resource tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceToolKind {
    /// `list_mcp_resources`.
    List,
    /// `list_mcp_resource_templates`.
    Templates,
    /// `read_mcp_resource`.
    Read,
}

/// A resource tool; reaches every enabled, non-hidden server with resources at call time.
pub struct ResourceTool {
    manager: Weak<McpManager>,
    kind: ResourceToolKind,
}

impl ResourceTool {
    /// A resource tool of `manager`.
    pub fn new(manager: Weak<McpManager>, kind: ResourceToolKind) -> Self {
        ResourceTool { manager, kind }
    }
}

fn arg(args: &Value, key: &str) -> Result<Option<String>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
        Some(_) => Err(ToolError::InvalidArguments(format!(
            "{key} must be a string"
        ))),
    }
}

/// A listed item without `_meta` and `icons`, tagged with its server; MCP App user interfaces
/// (`ui://`, `profile=mcp-app`) are left out.
fn listed(server: &str, item: &Value) -> Option<Value> {
    let uri = item
        .get("uri")
        .or_else(|| item.get("uriTemplate"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("");
    if uri.starts_with("ui://")
        || mime
            .to_ascii_lowercase()
            .replace(' ', "")
            .contains("profile=mcp-app")
        || mime
            .to_ascii_lowercase()
            .replace(' ', "")
            .contains("profile=\"mcp-app\"")
    {
        return None;
    }
    let mut m = Map::new();
    m.insert("server".into(), json!(server));
    for (k, v) in item.as_object().into_iter().flatten() {
        if k != "_meta" && k != "icons" {
            m.insert(k.clone(), v.clone());
        }
    }
    Some(Value::Object(m))
}

fn json_output(tool: &str, server: Option<&str>, payload: Value) -> ToolOutput {
    let (content, full) = limit_content(vec![Content::text(payload.to_string())]);
    let mut details = json!({"server": server.unwrap_or(""), "tool": tool});
    if let Some(p) = full {
        details["fullOutputPath"] = json!(p);
    }
    ToolOutput {
        content,
        details: Some(details),
        structured_content: Some(payload),
        is_error: None,
    }
}

#[async_trait]
impl AgentTool for ResourceTool {
    fn definition(&self) -> ToolDefinition {
        let s = |d: &str| json!({"type": "string", "description": d});
        let list_params = json!({
            "type": "object",
            "properties": {
                "server": s("Name of one MCP server; leave out to list all servers that offer resources."),
                "cursor": s("The nextCursor of an earlier call for the same server; leave out for the first page."),
            },
            "additionalProperties": false,
        });
        match self.kind {
            ResourceToolKind::List => ToolDefinition {
                name: "list_mcp_resources".into(),
                description: "List the resources that MCP servers offer: data such as files, records or schemas that can be read as context. Use these before searching the web when a server has what you need.".into(),
                parameters: list_params,
            },
            ResourceToolKind::Templates => ToolDefinition {
                name: "list_mcp_resource_templates".into(),
                description: "List the resource templates of MCP servers: URI patterns with parameters for resources the servers do not list one by one. Use these before searching the web when a server has what you need.".into(),
                parameters: list_params,
            },
            ResourceToolKind::Read => ToolDefinition {
                name: "read_mcp_resource".into(),
                description: "Read one resource of an MCP server by server name and URI.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "server": s("The MCP server's configured name, as in the 'server' field of list_mcp_resources."),
                        "uri": s("The resource URI, as listed by list_mcp_resources."),
                    },
                    "required": ["server", "uri"],
                    "additionalProperties": false,
                }),
            },
        }
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let Some(manager) = self.manager.upgrade() else {
            return Err(ToolError::Failed("MCP is shut down".into()));
        };
        manager.wait_for_all(super::manager::DIRECT_WAIT).await;
        let servers = manager.resource_servers();
        let find = |name: &str| {
            servers
                .iter()
                .find(|s| s.cfg.name == name)
                .cloned()
                .ok_or_else(|| {
                    let names: Vec<&str> = servers.iter().map(|s| s.cfg.name.as_str()).collect();
                    let avail = if names.is_empty() {
                        String::new()
                    } else {
                        format!(". Servers with resources: {}", names.join(", "))
                    };
                    ToolError::Failed(format!("MCP server \"{name}\" has no resources{avail}"))
                })
        };
        let def_name = self.definition().name;
        match self.kind {
            ResourceToolKind::Read => {
                let server = arg(&args, "server")?
                    .ok_or_else(|| ToolError::Failed("server must be provided".into()))?;
                let uri = arg(&args, "uri")?
                    .ok_or_else(|| ToolError::Failed("uri must be provided".into()))?;
                let slot = find(&server)?;
                let u = uri.clone();
                let result = with_server(&slot, &ctx, true, |peer| {
                    let u = u.clone();
                    async move { peer.read_resource(&u).await }
                })
                .await?;
                let contents: Vec<Value> = result
                    .get("contents")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut content = Vec::new();
                for c in &contents {
                    if contents.len() > 1 {
                        let u = c.get("uri").and_then(Value::as_str).unwrap_or("");
                        content.push(Content::text(format!("{u}:")));
                    }
                    content.push(resource_to_content(c));
                }
                if content.is_empty() {
                    content.push(Content::text(format!("Resource {uri} is empty.")));
                }
                let (content, full) = limit_content(content);
                let mut details = json!({"server": server, "tool": def_name});
                if let Some(p) = full {
                    details["fullOutputPath"] = json!(p);
                }
                let contents: Vec<Value> = contents
                    .into_iter()
                    .map(|mut c| {
                        if let Some(o) = c.as_object_mut() {
                            o.remove("_meta");
                        }
                        c
                    })
                    .collect();
                Ok(ToolOutput {
                    content,
                    details: Some(details),
                    structured_content: Some(
                        json!({"server": server, "uri": uri, "contents": contents}),
                    ),
                    is_error: None,
                })
            }
            kind => {
                let key = if kind == ResourceToolKind::List {
                    "resources"
                } else {
                    "resourceTemplates"
                };
                let server = arg(&args, "server")?;
                let cursor = arg(&args, "cursor")?;
                let page = |slot: Arc<ServerSlot>, cursor: Option<String>| {
                    let ctx = ctx.clone();
                    async move {
                        with_server(&slot, &ctx, true, |peer| {
                            let cursor = cursor.clone();
                            async move {
                                if kind == ResourceToolKind::List {
                                    peer.list_resources(cursor).await
                                } else {
                                    peer.list_resource_templates(cursor).await
                                }
                            }
                        })
                        .await
                    }
                };
                if let Some(name) = server {
                    let slot = find(&name)?;
                    let r = page(slot, cursor).await?;
                    let items: Vec<Value> = r
                        .get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|i| listed(&name, i))
                        .collect();
                    let mut payload = json!({"server": name, key: items});
                    if let Some(c) = r.get("nextCursor").filter(|c| c.is_string()) {
                        payload["nextCursor"] = c.clone();
                    }
                    return Ok(json_output(&def_name, Some(&name), payload));
                }
                if cursor.is_some() {
                    return Err(ToolError::Failed(
                        "cursor can only be used when a server is specified".into(),
                    ));
                }
                let mut items = Vec::new();
                let mut errors = Vec::new();
                for slot in servers.iter() {
                    let name = slot.cfg.name.clone();
                    let mut cursor = None;
                    // Every page, stopping at a repeated cursor or 1000 pages.
                    for _ in 0..1000 {
                        match page(slot.clone(), cursor.clone()).await {
                            Ok(r) => {
                                items.extend(
                                    r.get(key)
                                        .and_then(Value::as_array)
                                        .into_iter()
                                        .flatten()
                                        .filter_map(|i| listed(&name, i)),
                                );
                                let next = r
                                    .get("nextCursor")
                                    .and_then(Value::as_str)
                                    .map(str::to_string);
                                if next.is_none() || next == cursor {
                                    break;
                                }
                                cursor = next;
                            }
                            Err(e) => {
                                errors.push(json!({"server": name, "error": e.to_string()}));
                                break;
                            }
                        }
                    }
                }
                let mut payload = json!({ key: items });
                if !errors.is_empty() {
                    payload["errors"] = json!(errors);
                }
                Ok(json_output(&def_name, None, payload))
            }
        }
    }
}
