//! `<agent dir>/mcp.log`: the `notifications/message` log lines servers send, one append each
//! (several `pi` processes may share the file), as
//! `<ISO time> [<server>] <level> <logger>: <message>` with continuation lines indented by four
//! spaces; moved to `mcp.log.1` once it is past 5 MB (docs/mcp.md "Diagnose connection
//! problems"). Write errors are ignored: logging never breaks a tool call.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Rotation threshold (upstream: 5 MB).
pub const MAX_LOG_BYTES: u64 = 5 * 1024 * 1024;

/// A shared appender to one log file.
#[derive(Clone)]
pub struct McpLog {
    path: Option<Arc<PathBuf>>,
    lock: Arc<parking_lot::Mutex<()>>,
}

impl McpLog {
    /// Appends to `path`.
    pub fn new(path: PathBuf) -> Self {
        McpLog {
            path: Some(Arc::new(path)),
            lock: Arc::default(),
        }
    }

    /// Discards everything (`pi mcp list`).
    pub fn none() -> Self {
        McpLog {
            path: None,
            lock: Arc::default(),
        }
    }

    /// Appends one message.
    pub fn append(&self, server: &str, level: &str, logger: &str, data: &str) {
        let Some(path) = &self.path else { return };
        let logger = if logger.is_empty() {
            String::new()
        } else {
            format!(" {logger}:")
        };
        let text = data.replace("\r\n", "\n").replace('\n', "\n    ");
        let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
        let line = format!("{now} [{server}] {level}{logger} {text}\n");
        let _guard = self.lock.lock();
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if std::fs::metadata(path.as_ref()).is_ok_and(|m| m.len() > MAX_LOG_BYTES) {
            let mut rotated = path.as_os_str().to_owned();
            rotated.push(".1");
            let _ = std::fs::rename(path.as_ref(), PathBuf::from(rotated));
        }
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path.as_ref())
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}
