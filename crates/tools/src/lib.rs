//! Built-in tools of the coding agent (spec tools.md): `read`, `bash`, `edit`, `write`, `grep`,
//! `find`, `ls`, plus the shell engine shared with the RPC `bash` command ([`shell`]).
//!
//! Every tool is constructed with the session working directory; relative path arguments resolve
//! against it (spec tools.md §0.3).

pub mod bash;
pub mod edit;
pub mod edit_diff;
pub mod find;
pub mod grep;
pub mod ls;
pub mod read;
pub mod sandbox;
pub mod select;
pub mod shell;
pub mod truncate;
pub mod util;
mod walk;
pub mod write;

pub use bash::{BashTool, BashToolOptions};
pub use edit::EditTool;
pub use find::FindTool;
pub use grep::GrepTool;
pub use ls::LsTool;
pub use read::ReadTool;
pub use shell::{execute_user_bash, BashResult, UserBashOptions};
pub use write::WriteTool;

use pi_agent::AgentTool;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Tools active by default, in the order upstream offers them to the model.
pub const DEFAULT_TOOLS: [&str; 4] = ["read", "bash", "edit", "write"];

/// The name of the `codemode` tool (built in `pi_coding_agent::codemode`, a higher floor; named here so
/// that tool selection needs nothing from above).
pub const CODEMODE_TOOL: &str = "codemode";

/// Every built-in tool name, in upstream's order.
pub const ALL_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// Settings-dependent options for [`create_tools_with`].
#[derive(Debug, Clone, Default)]
pub struct ToolOptions {
    /// Options of the bash tool (`shellPath`, `shellCommandPrefix`, `<agentDir>/bin`, env).
    pub bash: BashToolOptions,
    /// How the read tool prepares images (bound by the session to its model and settings).
    pub images: pi_platform::images::ImagePolicySlot,
    /// The sandbox of the bash tool's commands and the file tools' paths (setting `sandbox`,
    /// `--sandbox`; default `full` = none).
    pub sandbox: sandbox::SandboxPolicy,
}

/// Creates the named built-in tools (unknown names are skipped) for `cwd`, in the order given.
pub fn create_tools(cwd: &Path, names: &[&str]) -> Vec<Arc<dyn AgentTool>> {
    create_tools_with(cwd, names, &ToolOptions::default())
}

/// [`create_tools`] with explicit options.
pub fn create_tools_with(
    cwd: &Path,
    names: &[&str],
    options: &ToolOptions,
) -> Vec<Arc<dyn AgentTool>> {
    names
        .iter()
        .filter_map(|name| create_tool(cwd, name, options))
        .collect()
}

/// Creates one built-in tool by name, `None` for an unknown name.
pub fn create_tool(cwd: &Path, name: &str, options: &ToolOptions) -> Option<Arc<dyn AgentTool>> {
    let root: &Path = cwd;
    let cwd: PathBuf = root.to_path_buf();
    let tool: Arc<dyn AgentTool> = match name {
        "read" => Arc::new(ReadTool::with_images(cwd, options.images.clone())),
        "bash" => {
            let mut bash = options.bash.clone();
            bash.sandbox = options.sandbox;
            Arc::new(BashTool::new(cwd, bash))
        }
        "edit" => Arc::new(EditTool::new(cwd)),
        "write" => Arc::new(WriteTool::new(cwd)),
        "grep" => Arc::new(GrepTool::new(cwd)),
        "find" => Arc::new(FindTool::new(cwd)),
        "ls" => Arc::new(LsTool::new(cwd)),
        _ => return None,
    };
    Some(sandbox::guard_tool(tool, name, root, options.sandbox))
}

/// Builders for the parameter schemas. Key order matches upstream's TypeBox output:
/// `type`, `required`, `properties` for objects and `type`, `description` for leaves.
pub mod schema {
    use serde_json::{json, Map, Value};

    /// `{"type":"object","required":[…],"properties":{…}}` (`required` omitted when empty).
    pub fn object(required: &[&str], properties: Vec<(&str, Value)>) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), json!("object"));
        if !required.is_empty() {
            m.insert("required".into(), json!(required));
        }
        let mut props = Map::new();
        for (k, v) in properties {
            props.insert(k.to_string(), v);
        }
        m.insert("properties".into(), Value::Object(props));
        Value::Object(m)
    }

    /// `{"type":"string","description":…}`.
    pub fn string(description: &str) -> Value {
        json!({"type": "string", "description": description})
    }

    /// `{"type":"number","description":…}`.
    pub fn number(description: &str) -> Value {
        json!({"type": "number", "description": description})
    }

    /// `{"type":"boolean","description":…}`.
    pub fn boolean(description: &str) -> Value {
        json!({"type": "boolean", "description": description})
    }
}
