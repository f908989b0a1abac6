//! `pi --help`: the fixed prose (title, usage, footer) around the rows of the subcommand and
//! flag tables (`flags.rs`).

use super::flags::{Section, COMMANDS, FLAGS};
use std::fmt::Write as _;

/// The first lines, up to the `Commands:` section.
const TITLE: &str = "\
pi - coding agent with read, bash, edit and write tools (Rust build: print, json and rpc modes)

Usage:
  pi [options] [--] [@files...] [messages...]

";

/// The last lines, after the options and the extension flags.
const FOOTER: &str = "
Configuration lives in the agent directory ($PI_CODING_AGENT_DIR, default ~/.pi/agent):
settings.json, models.json, auth.json, trust.json, sessions/.
";

/// The column a command's help starts at, after two spaces of indent.
const COMMAND_WIDTH: usize = 29;

/// The column a flag's help starts at, after two spaces of indent.
const FLAG_WIDTH: usize = 31;

/// The whole `--help` text, with `extension_flags` (see [`super::help_with`]) after the
/// options.
pub(super) fn render(extension_flags: &str) -> String {
    let mut out = String::from(TITLE);
    out.push_str("Commands:\n");
    for command in COMMANDS {
        let usage = format!("pi {} {}", command.name, command.args);
        let _ = writeln!(
            out,
            "  {:<COMMAND_WIDTH$}{}",
            usage.trim_end(),
            command.help
        );
    }
    let mut sections: Vec<Section> = Vec::new();
    for flag in FLAGS {
        if !sections.contains(&flag.section) {
            sections.push(flag.section);
        }
    }
    for section in sections {
        out.push('\n');
        out.push_str(section.heading());
        out.push('\n');
        for flag in FLAGS.iter().filter(|f| f.section == section) {
            let mut lines = flag.help.lines();
            let first = lines.next().unwrap_or_default();
            let _ = writeln!(out, "  {:<FLAG_WIDTH$}{first}", flag.label());
            for line in lines {
                let _ = writeln!(out, "  {:FLAG_WIDTH$}{line}", "");
            }
        }
    }
    out.push_str(extension_flags);
    out.push_str(FOOTER);
    out
}
