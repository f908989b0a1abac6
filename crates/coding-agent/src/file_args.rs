//! `@path` arguments and piped stdin in print and json modes (upstream-1.6-notes.md item 24;
//! spec config.md §7.1–§7.2; upstream 1.6 `docs/cli.md` "File arguments").
//!
//! * A text file becomes `<file name="/abs/path">\n<content>\n</file>\n` (BOM removed).
//! * An image (PNG, JPEG, GIF, WebP, BMP by its bytes) is attached to the first message and
//!   named by `<file name="/abs/path"></file>\n`, or `<file name="/abs/path">notes</file>\n`
//!   when it was converted (BMP → PNG); it is resized later, for the model of the run
//!   ([`crate::images`]). An image that does not decode is an error.
//! * Empty files are skipped; a missing file is the error `File not found: <abs path>`.
//! * The first message is the piped stdin (trimmed), then the file blocks, then the first
//!   positional message, joined without separators.

use crate::images::{detect_image_mime, prepare_image, ImageError, ImagePolicy};
use pi_ai::ImageContent;
use std::path::{Path, PathBuf};

/// Why the file arguments could not be read (the message is printed as `Error: <message>`,
/// exit 1).
#[derive(Debug, thiserror::Error)]
pub enum FileArgError {
    /// The path does not exist.
    #[error("File not found: {0}")]
    NotFound(PathBuf),
    /// The file is an image that does not decode.
    #[error("Could not read image file {path}: {source}")]
    Image {
        /// Absolute path.
        path: PathBuf,
        /// Why.
        source: ImageError,
    },
    /// The file exists but could not be read.
    #[error("Could not read file {path}: {source}")]
    Read {
        /// Absolute path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The text blocks and images of the `@path` arguments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileArgs {
    /// Concatenated `<file …>` blocks.
    pub text: String,
    /// Attached images, in argument order.
    pub images: Vec<ImageContent>,
}

/// `arg` as an absolute path: `~` expanded, relative to `cwd`, `.` and `..` removed lexically.
pub fn absolute(cwd: &Path, arg: &str) -> PathBuf {
    let expanded = crate::config::expand_home(arg);
    let path = if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    };
    // Lexically normalise `.` and `..` (upstream resolves the path the same way).
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Reads the `@path` arguments (without their `@`) relative to `cwd`.
pub fn process_file_args(cwd: &Path, args: &[String]) -> Result<FileArgs, FileArgError> {
    let mut out = FileArgs::default();
    for arg in args {
        let path = absolute(cwd, arg);
        if !path.exists() {
            return Err(FileArgError::NotFound(path));
        }
        let bytes = std::fs::read(&path).map_err(|source| FileArgError::Read {
            path: path.clone(),
            source,
        })?;
        if bytes.is_empty() {
            continue;
        }
        let name = path.display();
        if let Some(mime) = detect_image_mime(&bytes) {
            // Resizing waits for the run's model (upstream 1.6 `prepareInitialMessage`).
            let policy = ImagePolicy {
                auto_resize: false,
                ..ImagePolicy::default()
            };
            let prepared = prepare_image(&bytes, mime, None, &policy).map_err(|source| {
                FileArgError::Image {
                    path: path.clone(),
                    source,
                }
            })?;
            out.images.push(prepared.image);
            out.text.push_str(&format!(
                "<file name=\"{name}\">{}</file>\n",
                prepared.hints.join("\n")
            ));
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        out.text
            .push_str(&format!("<file name=\"{name}\">\n{text}\n</file>\n"));
    }
    Ok(out)
}

/// The first message of a print/json run: piped stdin, then the file text, then the first
/// positional message (removed from `messages`), joined without separators; `None` when all
/// three are absent.
pub fn initial_message(
    stdin: Option<String>,
    files: &FileArgs,
    messages: &mut Vec<String>,
) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    parts.extend(stdin);
    if !files.text.is_empty() {
        parts.push(files.text.clone());
    }
    if !messages.is_empty() {
        parts.push(messages.remove(0));
    }
    (!parts.is_empty()).then(|| parts.concat())
}

/// Reads piped stdin to the end (lossy UTF-8), trimmed; `None` when it is empty or cannot be
/// read.
pub fn read_piped_stdin() -> Option<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::io::stdin().read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).trim().to_string();
    (!text.is_empty()).then_some(text)
}
