//! The extensions' slash commands (`get_commands`, running one) and command-line flags
//! (`pi.registerFlag`).

use super::host::{self, HostError};
use super::wire::{self, FlagInfo, ToHost};
use super::Extensions;
use crate::protocol::rpc::SlashCommand;
use crate::resources::SourceInfo;
use serde_json::Value;

impl Extensions {
    /// The registered slash commands in load order, as `get_commands` lists them (§4.10):
    /// `source: "extension"`, `sourceInfo: {path, source, scope, origin: "top-level"}`.
    pub fn commands(&self) -> Vec<SlashCommand> {
        let mut out = vec![];
        for ext in &self.loaded.read().extensions {
            let src = self
                .sources
                .iter()
                .find(|s| s.path.to_string_lossy() == ext.path.as_str());
            for c in &ext.commands {
                out.push(SlashCommand {
                    name: c.name.clone(),
                    description: c.description.clone(),
                    source: "extension".into(),
                    source_info: match src.and_then(|s| s.package.as_ref()) {
                        Some(info) => wire::value_of(info),
                        None => wire::value_of(&SourceInfo {
                            path: ext.path.clone(),
                            source: src.map_or("local", |s| s.source).into(),
                            scope: src.map_or("user", |s| s.scope).into(),
                            origin: "top-level".into(),
                            base_dir: None,
                            changelog_path: None,
                        }),
                    },
                });
            }
        }
        out
    }

    /// If `text` is `/<name> [args]` for a registered command: its name and trimmed args.
    pub fn command_of(&self, text: &str) -> Option<(String, String)> {
        let rest = text.strip_prefix('/')?;
        let (name, args) = match rest.find(char::is_whitespace) {
            Some(i) => (&rest[..i], rest[i..].trim()),
            None => (rest, ""),
        };
        self.loaded
            .read()
            .extensions
            .iter()
            .any(|e| e.commands.iter().any(|c| c.name == name))
            .then(|| (name.to_string(), args.to_string()))
    }

    /// Runs a registered command to completion (dialogs included). A handler that throws has
    /// already been reported as `extension_error` (`command:<name>`, `command`) by the host.
    pub async fn run_command(&self, name: &str, args: &str) -> Result<(), HostError> {
        self.run_command_then(name, args, Box::new(|| {})).await
    }

    /// [`Extensions::run_command`]; `on_done` is called by the host's reader as soon as the
    /// handler's promise has settled, before anything the host sends after it (upstream
    /// writes a command's `handled` response right when the handler returns, so a run the
    /// handler started with `sendUserMessage` just before returning comes after it). When the
    /// command fails otherwise (host died, input closed), `on_done` is not called.
    pub async fn run_command_then(
        &self,
        name: &str,
        args: &str,
        on_done: host::ReplyHook,
    ) -> Result<(), HostError> {
        self.push_state();
        let id = self.host.next_id();
        let msg = ToHost::Command {
            id,
            name: name.into(),
            args: args.into(),
        };
        match self.host.request_then(id, &msg, None, on_done).await {
            Ok(_) => Ok(()),
            Err(e) => {
                self.error(&format!("command:{name}"), "command", &e.to_string());
                Err(e)
            }
        }
    }

    /// Resolves once the host has sent everything it scheduled before now (a
    /// `sendUserMessage` made just before a command handler returned, which the host sends
    /// one macrotask later), and pi has handled it. A host that does not answer within the
    /// hook timeout is given up on.
    pub async fn quiesce(&self) {
        let id = self.host.next_id();
        let _ = self
            .host
            .request(id, &ToHost::Ping { id }, Some(self.hook_timeout))
            .await;
    }

    /// The flags the extensions registered (`pi.registerFlag`), in load order.
    pub fn flags(&self) -> Vec<FlagInfo> {
        self.loaded
            .read()
            .extensions
            .iter()
            .flat_map(|e| e.flags.iter().cloned())
            .collect()
    }

    /// The `Extension CLI Flags:` section of `pi --help` (upstream `printHelp`): one line per
    /// registered flag of every extension, in load order, `  --name` (with ` <value>` for a
    /// `string` flag) padded to 30 columns, then its description or `Registered by <path>`;
    /// ends with a newline. Empty when no flag is registered.
    pub fn help_section(&self) -> String {
        let loaded = self.loaded.read();
        let lines: Vec<String> = loaded
            .extensions
            .iter()
            .flat_map(|e| e.flags.iter().map(move |f| (e.path.as_str(), f)))
            .map(|(path, f)| {
                let value = if f.kind.as_deref() == Some("string") {
                    " <value>"
                } else {
                    ""
                };
                let description = match &f.description {
                    Some(d) => d.clone(),
                    None => format!("Registered by {path}"),
                };
                format!("{:<30}{description}", format!("  --{}{value}", f.name))
            })
            .collect();
        if lines.is_empty() {
            return String::new();
        }
        format!("Extension CLI Flags:\n{}\n", lines.join("\n"))
    }

    /// Matches the command line's unknown `--flags` against the registered ones (upstream
    /// `applyExtensionFlagValues`) and hands the values to the host: a boolean flag is `true`
    /// (a value after it is consumed and ignored, as upstream), a string flag takes its value.
    /// `Err`: the message for stderr (`Unknown option(s): --a, --b`, or `Extension flag
    /// "--x" requires a value`); the caller exits 1.
    pub fn apply_flags(&self, given: &[(String, crate::cli::FlagValue)]) -> Result<(), String> {
        let registered = self.flags();
        let mut values = serde_json::Map::new();
        let mut unknown = vec![];
        let mut errors = vec![];
        for (name, value) in given {
            let Some(flag) = registered.iter().find(|f| f.name == *name) else {
                unknown.push(format!("--{name}"));
                continue;
            };
            match (flag.kind.as_deref().unwrap_or("boolean"), value) {
                ("boolean", _) => {
                    values.insert(name.clone(), Value::Bool(true));
                }
                (_, crate::cli::FlagValue::Text(t)) => {
                    values.insert(name.clone(), Value::String(t.clone()));
                }
                (_, crate::cli::FlagValue::Bool) => {
                    errors.push(format!("Extension flag \"--{name}\" requires a value"))
                }
            }
        }
        if !unknown.is_empty() {
            let s = if unknown.len() == 1 { "" } else { "s" };
            errors.push(format!("Unknown option{s}: {}", unknown.join(", ")));
        }
        if !values.is_empty() {
            self.flag_values.lock().extend(values.clone());
            self.host.send(&ToHost::Flags { values });
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }
}
