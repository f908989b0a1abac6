//! The tools a `codemode` script can call and `tool_search` can load, with what scripts learn
//! about them: JavaScript identifiers, TypeScript declarations, namespaces, and BM25 ranking
//! (upstream 1.6 `docs/codemode.md` "Call tools", `docs/mcp.md` "Control tool exposure").

use pi_agent::AgentTool;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// What a call resolves to inside a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// The text output (edit, write, most tools).
    Text,
    /// `read`: the text, or an image block `{type, data, mimeType, note}`.
    Read,
    /// `bash`: `{ output, truncated, full_output_path?, exit_code, wall_time_seconds }`.
    Bash,
    /// MCP tools: the server's `CallToolResult`, `isError` included.
    McpResult,
}

/// The TypeScript type of an MCP `CallToolResult` as scripts see it.
pub const MCP_RESULT_TS: &str = "{ content: Array<{ data?: string; mimeType?: string; text?: string; type: \"text\" | \"image\" | \"audio\" | \"resource_link\" | \"resource\"; [key: string]: unknown; }>; isError?: boolean; structuredContent?: unknown; [key: string]: unknown; }";

impl Returns {
    /// The TypeScript type a call resolves to.
    pub fn ts(self) -> &'static str {
        match self {
            Returns::Text => "string",
            Returns::Read => "string | { data: string; mimeType: string; note: string; type: \"image\"; }",
            Returns::Bash => "{ output: string; truncated: boolean; full_output_path?: string; exit_code: number; wall_time_seconds: number; }",
            Returns::McpResult => MCP_RESULT_TS,
        }
    }

    /// The short form used in declared tools' descriptions (mode `on`).
    pub fn short(self) -> String {
        match self {
            Returns::Text => "a string".into(),
            Returns::Bash => {
                "`{ output, truncated, full_output_path?, exit_code, wall_time_seconds }`".into()
            }
            other => format!("`{}`", other.ts()),
        }
    }

    /// How a tool of this name resolves.
    pub fn of(name: &str) -> Returns {
        match name {
            "read" => Returns::Read,
            "bash" => Returns::Bash,
            n if n.starts_with("mcp__") => Returns::McpResult,
            _ => Returns::Text,
        }
    }
}

/// One callable tool.
#[derive(Clone)]
pub struct Entry {
    /// The session name (`read`, `mcp__fake__echo`).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its parameter schema.
    pub parameters: Value,
    /// `mcp__<server>` for MCP tools, `None` for the session's own tools.
    pub namespace: Option<String>,
    /// The server's configured description (MCP tools), used for ranking.
    pub namespace_description: Option<String>,
    /// What a call resolves to.
    pub returns: Returns,
    /// Runs the call.
    pub tool: Arc<dyn AgentTool>,
}

/// `name` as a JavaScript identifier: every character but `[A-Za-z0-9_$]` becomes `_`, and a
/// leading digit gets a `_` in front (`mcp__dev-radius__search` → `mcp__dev_radius__search`).
pub fn js_identifier(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// The TypeScript type of a JSON schema (objects, arrays, enums, scalar types; anything else
/// is `unknown`).
pub fn ts_type(schema: &Value) -> String {
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        if !e.is_empty() {
            return e
                .iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>()
                .join(" | ");
        }
    }
    if let Some(c) = schema.get("const") {
        return c.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            return alts.iter().map(ts_type).collect::<Vec<_>>().join(" | ");
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => {
            return ts
                .iter()
                .filter_map(Value::as_str)
                .map(|t| {
                    let mut s = schema.clone();
                    s["type"] = json!(t);
                    ts_type(&s)
                })
                .collect::<Vec<_>>()
                .join(" | ")
        }
        _ if schema.get("properties").is_some() => "object".into(),
        _ => return "unknown".into(),
    };
    match ty.as_str() {
        "string" => "string".into(),
        "number" | "integer" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => {
            let item = schema.get("items").map(ts_type).unwrap_or("unknown".into());
            format!("Array<{item}>")
        }
        "object" => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = String::from("{ ");
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    let opt = if required.contains(&k.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    let key = if js_identifier(k) == *k {
                        k.clone()
                    } else {
                        Value::String(k.clone()).to_string()
                    };
                    out.push_str(&format!("{key}{opt}: {}; ", ts_type(v)));
                }
            }
            if schema
                .get("additionalProperties")
                .is_some_and(serde_json::Value::is_object)
            {
                out.push_str("[key: string]: unknown; ");
            }
            out.push('}');
            out
        }
        _ => "unknown".into(),
    }
}

impl Entry {
    /// `declare const tools: { <id>(args: <params>): Promise<<returns>>; };`
    pub fn declaration(&self) -> String {
        format!(
            "declare const tools: {{ {}(args: {}): Promise<{}>; }};",
            js_identifier(&self.name),
            ts_type(&self.parameters),
            self.returns.ts()
        )
    }

    /// What `describeTool()` resolves to: the description, then the declaration in a `ts`
    /// fence.
    pub fn describe(&self) -> String {
        format!(
            "{}\n\nTypeScript declaration for codemode scripts:\n```ts\n{}\n```",
            self.description,
            self.declaration()
        )
    }
}

/// The namespace names `name` may be given as: `mcp__dev-radius`, `mcp__dev_radius`,
/// `dev-radius` or `dev_radius` all name the server `dev-radius`.
pub fn namespace_matches(namespace: &str, server: &str, name: &str) -> bool {
    let bare = name.strip_prefix("mcp__").unwrap_or(name);
    name == namespace || bare == server || js_identifier(bare) == js_identifier(server)
}

fn tokens(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Ranks `docs` (each one's text) against `query` with BM25 (k1 = 1.2, b = 0.75); returns the
/// indices of documents sharing at least one term with the query, best first, at most
/// `limit`. Ties keep the documents' order.
pub fn bm25(docs: &[String], query: &str, limit: usize) -> Vec<usize> {
    let q = tokens(query);
    if q.is_empty() || docs.is_empty() {
        return Vec::new();
    }
    let toks: Vec<Vec<String>> = docs.iter().map(|d| tokens(d)).collect();
    let n = toks.len() as f64;
    let avg = toks.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let mut df: HashMap<&str, usize> = HashMap::new();
    for t in &toks {
        let mut seen: Vec<&str> = t.iter().map(String::as_str).collect();
        seen.sort_unstable();
        seen.dedup();
        for s in seen {
            *df.entry(s).or_default() += 1;
        }
    }
    let mut scored: Vec<(usize, f64)> = toks
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let len = t.len() as f64;
            let mut score = 0.0;
            for term in &q {
                let tf = t.iter().filter(|x| *x == term).count() as f64;
                if tf == 0.0 {
                    continue;
                }
                let d = df.get(term.as_str()).copied().unwrap_or(0) as f64;
                let idf = ((n - d + 0.5) / (d + 0.5) + 1.0).ln();
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len / avg.max(1.0)));
            }
            (score > 0.0).then_some((i, score))
        })
        .collect();
    scored.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal));
    scored.into_iter().take(limit).map(|(i, _)| i).collect()
}

/// The text an entry is ranked by: name (split at `_`), description, namespace description.
pub fn search_text(e: &Entry) -> String {
    format!(
        "{} {} {} {}",
        e.name,
        e.name.replace('_', " "),
        e.description,
        e.namespace_description.as_deref().unwrap_or("")
    )
}
