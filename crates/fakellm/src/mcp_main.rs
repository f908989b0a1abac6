//! `fake-mcp`: a scripted MCP server for tests, on `rmcp`'s server side (issue 13).
//!
//! Usage: `fake-mcp [--http 127.0.0.1:0] [--tools N] [--pidfile PATH] [--hang] [--garbage]
//! [--exit] [--instructions TEXT]`.
//!
//! * stdio by default; `--http ADDR` serves streamable HTTP at `http://ADDR/mcp` and prints that
//!   URL as the first stdout line.
//! * Tools: `echo {text}` → `echo: <text>`; `add {a, b}` → the sum as text; `image` → a 1×1 PNG;
//!   `big {bytes}` → that many bytes of text (`0123456789` repeated, newline every 100);
//!   `sleep {ms}` → `slept <ms>` after that long; `fail` → an `isError` result;
//!   `crash` → the process exits mid-call; `log {text}` → a log notification, then `logged`;
//!   `dash-name` and `dash_name` (collide once sanitised); plus `tool_0`…`tool_<N-1>` (`--tools N`).
//! * Resources: `fake://readme` (text) and `fake://logo.png` (image); template `fake://item/{id}`.
//! * `--hang`: never answers (reads stdin forever); `--garbage`: writes non-JSON lines and
//!   exits; `--exit`: writes to stderr and exits 3 at once; `--pidfile`: writes its pid first.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, InitializeResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::io::Write;

const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

#[derive(Clone)]
struct Fake {
    extra_tools: usize,
    instructions: Option<String>,
}

fn from<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn tool(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props, "required": required},
    })
}

impl Fake {
    fn tools(&self) -> Vec<Value> {
        let mut t = vec![
            tool(
                "echo",
                "Echo the text back",
                json!({"text": {"type": "string"}}),
                &["text"],
            ),
            tool(
                "add",
                "Add two numbers",
                json!({"a": {"type": "number"}, "b": {"type": "number"}}),
                &["a", "b"],
            ),
            tool("image", "Return a tiny PNG", json!({}), &[]),
            tool(
                "big",
                "Return many bytes",
                json!({"bytes": {"type": "number"}}),
                &["bytes"],
            ),
            tool(
                "sleep",
                "Sleep, then answer",
                json!({"ms": {"type": "number"}}),
                &["ms"],
            ),
            tool("fail", "Always fails", json!({}), &[]),
            tool("crash", "Exit the server mid-call", json!({}), &[]),
            tool(
                "log",
                "Send a log message",
                json!({"text": {"type": "string"}}),
                &["text"],
            ),
            json!({"name": "dash-name", "inputSchema": {"type": "object"}}),
            json!({"name": "dash_name", "inputSchema": {"type": "object"}}),
        ];
        for i in 0..self.extra_tools {
            t.push(tool(
                &format!("tool_{i}"),
                &format!("Extra tool number {i}"),
                json!({"x": {"type": "string"}}),
                &[],
            ));
        }
        t
    }
}

fn text_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

impl ServerHandler for Fake {
    fn get_info(&self) -> InitializeResult {
        let mut v = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}, "resources": {}, "logging": {}},
            "serverInfo": {"name": "fake-mcp", "version": "1.0.0"},
        });
        if let Some(i) = &self.instructions {
            v["instructions"] = json!(i);
        }
        serde_json::from_value(v).unwrap_or_default()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        from(json!({"tools": self.tools()}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let s = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let n = |k: &str| args.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let v = match request.name.as_ref() {
            "echo" => text_result(&format!("echo: {}", s("text")), false),
            "add" => text_result(&format!("{}", n("a") + n("b")), false),
            "image" => json!({"content": [
                {"type": "text", "text": "a pixel"},
                {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}
            ]}),
            "big" => {
                let want = n("bytes") as usize;
                let mut out = String::with_capacity(want);
                while out.len() < want {
                    if out.len() % 101 == 100 {
                        out.push('\n');
                    } else {
                        out.push(char::from(b'0' + (out.len() % 10) as u8));
                    }
                }
                text_result(&out, false)
            }
            "sleep" => {
                tokio::time::sleep(std::time::Duration::from_millis(n("ms") as u64)).await;
                text_result(&format!("slept {}", n("ms")), false)
            }
            "fail" => text_result("it failed", true),
            "crash" => std::process::exit(7),
            #[allow(deprecated)]
            "log" => {
                let p = from(json!({"level": "warning", "logger": "fake", "data": s("text")}))?;
                let _ = context.peer.notify_logging_message(p).await;
                text_result("logged", false)
            }
            other if other.starts_with("tool_") || other.starts_with("dash") => {
                text_result(&format!("{other} ran"), false)
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        let r: CallToolResult = from(v)?;
        Ok(CallToolResponse::Complete(r))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        from(json!({"resources": [
            {"uri": "fake://readme", "name": "readme", "mimeType": "text/plain"},
            {"uri": "fake://logo.png", "name": "logo", "mimeType": "image/png"},
            {"uri": "ui://app", "name": "app ui", "mimeType": "text/html"}
        ]}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        from(json!({"resourceTemplates": [
            {"uriTemplate": "fake://item/{id}", "name": "item"}
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.clone();
        let contents = match uri.as_str() {
            "fake://readme" => {
                json!([{"uri": uri, "mimeType": "text/plain", "text": "Read me: fake resource text"}])
            }
            "fake://logo.png" => json!([{"uri": uri, "mimeType": "image/png", "blob": PNG_1X1}]),
            u if u.starts_with("fake://item/") => {
                json!([{"uri": uri, "text": format!("item {}", &u[12..])}])
            }
            _ => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {uri}"),
                    None,
                ))
            }
        };
        let r: ReadResourceResult = from(json!({ "contents": contents }))?;
        Ok(ReadResourceResponse::Complete(r))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let flag = |name: &str| args.iter().any(|a| a == name);
    if let Some(p) = opt("--pidfile") {
        let _ = std::fs::write(p, std::process::id().to_string());
    }
    if flag("--exit") {
        eprintln!("fake-mcp: exiting as asked");
        std::process::exit(3);
    }
    if flag("--garbage") {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "this is not json");
        let _ = writeln!(out, "{{\"jsonrpc\": \"1.0\", \"nonsense\": true}}");
        let _ = out.flush();
        std::process::exit(0);
    }
    if flag("--hang") {
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
        // stdin closed: keep hanging until killed.
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }
    let fake = Fake {
        extra_tools: opt("--tools").and_then(|n| n.parse().ok()).unwrap_or(0),
        instructions: opt("--instructions"),
    };
    if let Some(addr) = opt("--http") {
        use rmcp::transport::streamable_http_server::{
            session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
        };
        let service = StreamableHttpService::new(
            move || Ok(fake.clone()),
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = match tokio::net::TcpListener::bind(&addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("fake-mcp: bind {addr}: {e}");
                std::process::exit(1);
            }
        };
        if let Ok(a) = listener.local_addr() {
            println!("http://{a}/mcp");
            let _ = std::io::stdout().flush();
        }
        let _ = axum::serve(listener, router).await;
        return;
    }
    match fake.serve(rmcp::transport::io::stdio()).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(e) => eprintln!("fake-mcp: {e}"),
    }
}
