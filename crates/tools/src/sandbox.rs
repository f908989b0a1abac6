//! The kernel sandbox of the `bash` tool and the matching in-process boundary of the file tools
//! (issue 26; our own feature, upstream pi 1.6 has none).
//!
//! Setting `sandbox` (agent-dir `settings.json`, or a trusted project's `.pi/settings.json`;
//! merged as every setting, `config::Settings`) = `{"mode": "full" | "workspace-write" |
//! "read-only", "network": bool}`; `--sandbox <mode>` overrides the mode. No setting = `full` =
//! no sandbox at all (behaviour as before this module existed).
//!
//! * `workspace-write`: the shell and everything it starts may write only under the working
//!   directory, [`std::env::temp_dir`] and `/tmp`, and to the devices of [`WRITE_DEVICES`]; it
//!   may read everything.
//! * `read-only`: no writes except to [`WRITE_DEVICES`]; reads (and executing) only under the
//!   working directory, the temp dirs, the system directories of [`SYSTEM_READ_DIRS`] and the
//!   shell's own path.
//! * Both sandboxed modes: no network (TCP bind/connect, UDP, raw sockets) unless
//!   `network: true`; Unix-domain sockets keep working.
//!
//! Enforcement (Linux only): a Landlock ruleset (filesystem rights of ABI 3, TCP rights of ABI
//! 4) is built in the agent and applied in the forked child right before `exec`
//! ([`SandboxPolicy::apply`]); children and background processes inherit it and cannot drop
//! it. Landlock has no rule for UDP or raw sockets, so with the network off a seccomp filter
//! also answers `EACCES` to `socket(AF_INET|AF_INET6, <not a stream>)`, to `AF_INET` streams of
//! another protocol than TCP, to `AF_PACKET`, and to `io_uring_setup` (its socket
//! operation would pass by the filter). A kernel without the needed Landlock ABI, or another
//! OS, makes a sandboxed mode an error at start-up ([`SandboxPolicy::check_available`]): a
//! sandbox that was asked for is never silently dropped.
//!
//! The file tools check the same boundary in the agent ([`SandboxPolicy::check_write`],
//! [`SandboxPolicy::check_read`]), after resolving symlinks of the existing part of the path.
//! The RPC `bash` command (the user's own command) is not sandboxed.

use async_trait::async_trait;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::ToolDefinition;
use serde_json::{json, Value};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The settings key.
pub const SETTINGS_KEY: &str = "sandbox";

/// Devices a sandboxed command may always write (and read): the bit buckets, random sources
/// and the controlling terminal.
pub const WRITE_DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
];

/// System directories a `read-only` command may read and execute from (missing ones are
/// skipped).
pub const SYSTEM_READ_DIRS: [&str; 11] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev", "/sys",
];

/// Landlock ABI the filesystem rules need (3: `TRUNCATE`, without which `truncate(2)` would
/// pass by the write boundary).
pub const FS_ABI: i32 = 3;

/// Landlock ABI the network rules need (4: TCP bind/connect).
pub const NET_ABI: i32 = 4;

/// The sandbox mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// `"full"` (default): no sandbox.
    #[default]
    Full,
    /// `"workspace-write"`: writes only under the cwd and the temp dirs.
    WorkspaceWrite,
    /// `"read-only"`: no writes; reads only under the cwd, temp and system dirs.
    ReadOnly,
}

impl SandboxMode {
    /// The setting / CLI string.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Full => "full",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
        }
    }

    /// Parses a setting / CLI string; unknown strings give `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "full" => Some(SandboxMode::Full),
            "workspace-write" => Some(SandboxMode::WorkspaceWrite),
            "read-only" => Some(SandboxMode::ReadOnly),
            _ => None,
        }
    }
}

/// The effective sandbox of a run: mode and whether sandboxed commands may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// The mode.
    pub mode: SandboxMode,
    /// `network` of the setting (default false); only read in a sandboxed mode.
    pub network: bool,
    /// `userBash` of the setting (default false): the RPC `bash` command (the user's own
    /// command) runs in the sandbox too.
    pub user_bash: bool,
}

impl Default for SandboxPolicy {
    /// `full`: no sandbox.
    fn default() -> Self {
        SandboxPolicy {
            mode: SandboxMode::Full,
            network: false,
            user_bash: false,
        }
    }
}

fn mode_error(value: &str, source: &str) -> String {
    format!(
        "Invalid sandbox mode \"{value}\" ({source}). Valid values: full, workspace-write, read-only"
    )
}

impl SandboxPolicy {
    /// The policy of the merged `sandbox` setting (`setting`, `None` = unset;
    /// `Settings::get(SETTINGS_KEY)`), the CLI's `--sandbox <mode>` overriding the mode.
    ///
    /// Errors (the caller exits 1): `sandbox` that is not an object or has a key other than
    /// `mode` and `network`, an unknown mode (setting or
    /// CLI), a `network` that is not a boolean. A sandbox that was asked for is never dropped
    /// because its setting is malformed.
    pub fn from_setting(setting: Option<&Value>, cli_mode: Option<&str>) -> Result<Self, String> {
        let mut policy = SandboxPolicy::default();
        match setting {
            None => {}
            Some(Value::Object(m)) => {
                // A misspelt key (`mdoe`) would silently leave the sandbox off.
                if let Some(k) = m
                    .keys()
                    .find(|k| !matches!(k.as_str(), "mode" | "network" | "userBash"))
                {
                    return Err(format!(
                        "Invalid setting sandbox: unknown key \"{k}\" (expected \"mode\", \"network\" and \"userBash\")"
                    ));
                }
                match m.get("userBash") {
                    None => {}
                    Some(Value::Bool(b)) => policy.user_bash = *b,
                    Some(other) => {
                        return Err(format!(
                            "Invalid setting sandbox.userBash: {other} (expected true or false)"
                        ))
                    }
                }
                match m.get("mode") {
                    None => {}
                    Some(Value::String(s)) => {
                        policy.mode = SandboxMode::parse(s)
                            .ok_or_else(|| mode_error(s, "setting sandbox.mode"))?;
                    }
                    Some(other) => return Err(mode_error(&other.to_string(), "setting sandbox.mode")),
                }
                match m.get("network") {
                    None => {}
                    Some(Value::Bool(b)) => policy.network = *b,
                    Some(other) => {
                        return Err(format!(
                            "Invalid setting sandbox.network: {other} (expected true or false)"
                        ))
                    }
                }
            }
            Some(other) => {
                return Err(format!(
                    "Invalid setting sandbox: {other} (expected {{\"mode\": \"...\", \"network\": bool}})"
                ))
            }
        }
        if let Some(m) = cli_mode {
            policy.mode = SandboxMode::parse(m).ok_or_else(|| mode_error(m, "--sandbox"))?;
        }
        Ok(policy)
    }

    /// Whether a sandbox applies at all (any mode but `full`).
    pub fn is_sandboxed(&self) -> bool {
        self.mode != SandboxMode::Full
    }

    /// Whether sandboxed commands may use the network (always true under `full`).
    pub fn network_allowed(&self) -> bool {
        !self.is_sandboxed() || self.network
    }

    /// `{mode, network}` as the RPC `get_sandbox` command answers: `network` is the effective
    /// permission ([`SandboxPolicy::network_allowed`]).
    pub fn to_json(&self) -> Value {
        json!({"mode": self.mode.as_str(), "network": self.network_allowed()})
    }

    /// The Landlock ABI a sandboxed mode needs (`None` under `full`).
    pub fn required_abi(&self) -> Option<i32> {
        match (self.is_sandboxed(), self.network) {
            (false, _) => None,
            (true, true) => Some(FS_ABI),
            (true, false) => Some(NET_ABI),
        }
    }

    /// Checks that this kernel can enforce the policy: nothing to check under `full`; else
    /// Linux with a Landlock ABI of at least [`SandboxPolicy::required_abi`].
    ///
    /// Errors: a message naming the mode, the ABI needed and the one found (or the OS).
    pub fn check_available(&self) -> Result<(), String> {
        let Some(needed) = self.required_abi() else {
            return Ok(());
        };
        let found = landlock_abi();
        if found >= needed {
            return Ok(());
        }
        if cfg!(target_os = "linux") {
            Err(format!(
                "Sandbox mode {} needs Landlock ABI {needed} or newer, but this kernel offers {} \
                 (Landlock missing or disabled: see /sys/kernel/security/lsm). \
                 Refusing to run commands unsandboxed.",
                self.mode.as_str(),
                if found > 0 {
                    format!("ABI {found}")
                } else {
                    "none".to_string()
                }
            ))
        } else {
            Err(format!(
                "Sandbox mode {} is only available on Linux (Landlock). Refusing to run commands unsandboxed.",
                self.mode.as_str()
            ))
        }
    }

    /// One or two lines for the system prompt telling the model the boundary; `None` under
    /// `full`.
    pub fn prompt_text(&self, cwd: &Path) -> Option<String> {
        let cwd = cwd.display();
        let tmp = temp_roots()
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let files = match self.mode {
            SandboxMode::Full => return None,
            SandboxMode::WorkspaceWrite => format!(
                "Commands and file tools run in a sandbox (workspace-write): writes are allowed only under {cwd} and the temp directories ({tmp}); everything can be read."
            ),
            SandboxMode::ReadOnly => format!(
                "Commands and file tools run in a sandbox (read-only): nothing can be written (except /dev/null); reads are allowed only under {cwd}, the temp directories ({tmp}) and the system directories."
            ),
        };
        let net = if self.network {
            "Network access is allowed."
        } else {
            "Network access is blocked."
        };
        Some(format!("{files} {net}"))
    }

    /// Where a sandboxed command may write besides [`WRITE_DEVICES`]: the cwd and the temp
    /// dirs under `workspace-write`, nothing under `read-only`; `None` = anywhere (`full`).
    pub fn write_roots(&self, cwd: &Path) -> Option<Vec<PathBuf>> {
        match self.mode {
            SandboxMode::Full => None,
            SandboxMode::WorkspaceWrite => {
                let mut roots = vec![cwd.to_path_buf()];
                roots.extend(temp_roots());
                Some(roots)
            }
            SandboxMode::ReadOnly => Some(Vec::new()),
        }
    }

    /// Where a sandboxed command may read: the cwd, the temp dirs, [`SYSTEM_READ_DIRS`] and
    /// `shell` under `read-only`; `None` = anywhere (`full`, `workspace-write`).
    pub fn read_roots(&self, cwd: &Path, shell: Option<&Path>) -> Option<Vec<PathBuf>> {
        if self.mode != SandboxMode::ReadOnly {
            return None;
        }
        let mut roots = vec![cwd.to_path_buf()];
        roots.extend(temp_roots());
        roots.extend(SYSTEM_READ_DIRS.iter().map(PathBuf::from));
        roots.extend(WRITE_DEVICES.iter().map(PathBuf::from));
        if let Some(s) = shell {
            roots.push(s.to_path_buf());
        }
        Some(roots)
    }

    /// The in-process write boundary of the file tools (`write`, `edit`): `Ok` when `path`
    /// (absolute, or relative to `cwd`) may be written under this policy.
    ///
    /// Errors: `Sandbox (<mode>): writing <path> is not allowed (outside ...)`.
    pub fn check_write(&self, cwd: &Path, path: &Path) -> Result<(), String> {
        let Some(roots) = self.write_roots(cwd) else {
            return Ok(());
        };
        let target = resolve(&cwd.join(path));
        let devices = WRITE_DEVICES.iter().map(PathBuf::from);
        if devices.clone().any(|d| target == resolve(&d)) || within(&target, &roots) {
            return Ok(());
        }
        Err(match self.mode {
            SandboxMode::ReadOnly => format!(
                "Sandbox (read-only): writing {} is not allowed (nothing can be written)",
                path.display()
            ),
            _ => format!(
                "Sandbox ({}): writing {} is not allowed (outside {} and the temp directories)",
                self.mode.as_str(),
                path.display(),
                cwd.display()
            ),
        })
    }

    /// The in-process read boundary of the file tools (`read`, `grep`, `find`, `ls`): `Ok` when
    /// `path` (absolute, or relative to `cwd`) may be read under this policy.
    ///
    /// Errors: `Sandbox (read-only): reading <path> is not allowed (outside ...)`.
    pub fn check_read(&self, cwd: &Path, path: &Path) -> Result<(), String> {
        let Some(roots) = self.read_roots(cwd, None) else {
            return Ok(());
        };
        if within(&resolve(&cwd.join(path)), &roots) {
            return Ok(());
        }
        Err(format!(
            "Sandbox (read-only): reading {} is not allowed (outside {}, the temp directories and the system directories)",
            path.display(),
            cwd.display()
        ))
    }

    /// Makes `cmd` (the shell `shell` run in `cwd`) start sandboxed: the Landlock ruleset (and,
    /// with the network off, the seccomp program) is built here, in the agent, and applied in
    /// the child right before `exec` with async-signal-safe system calls only. Nothing to do
    /// under `full`. Hooks added earlier to `cmd` run first (the supervisor of
    /// [`pi_platform::child_guard::supervise_group`] stays outside the sandbox, the shell inside).
    ///
    /// Errors: the ruleset or the filter cannot be built (kernel without the ABI, see
    /// [`SandboxPolicy::check_available`]); failures in the child make the spawn fail with the
    /// OS error.
    pub fn apply(
        &self,
        cmd: &mut std::process::Command,
        cwd: &Path,
        shell: &Path,
    ) -> Result<(), String> {
        if !self.is_sandboxed() {
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        {
            linux::apply(*self, cmd, cwd, shell)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (cmd, cwd, shell);
            self.check_available()
        }
    }
}

/// The temp dirs a sandboxed command may always use: [`std::env::temp_dir`] and `/tmp`.
pub fn temp_roots() -> Vec<PathBuf> {
    let mut roots = vec![std::env::temp_dir()];
    let tmp = PathBuf::from("/tmp");
    if !roots.contains(&tmp) {
        roots.push(tmp);
    }
    roots
}

/// Symlinks an absolute path may pass through before [`resolve_links`] gives up (Linux's
/// `MAXSYMLINKS`).
const MAX_LINK_HOPS: usize = 40;

/// Where `path` really leads: made absolute (against the process cwd), every symlink on the
/// way followed, the last component's too, **including a dangling one** (writing through a
/// dangling link creates its target, so the target is what a boundary must judge), and
/// `.`/`..` applied in order, as the kernel walks a path. Components that do not exist are
/// taken as written. `None` when the walk passes more than [`MAX_LINK_HOPS`] links or a link
/// cannot be read: callers refuse such a path.
pub fn resolve_links(path: &Path) -> Option<PathBuf> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let mut pending: VecDeque<OsString> = VecDeque::new();
    let push_front = |pending: &mut VecDeque<OsString>, p: &Path| {
        let parts = p.components().filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        });
        for part in parts.rev() {
            pending.push_front(part);
        }
    };
    push_front(&mut pending, &abs);
    let mut out = PathBuf::from("/");
    let mut hops = 0usize;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&part);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                push_front(&mut pending, &target);
            }
            _ => out = next,
        }
    }
    Some(out)
}

/// [`resolve_links`], or a path no boundary contains when it gives up.
fn resolve(path: &Path) -> PathBuf {
    resolve_links(path).unwrap_or_else(|| PathBuf::from("/\u{0}unresolvable"))
}

/// Whether `target` (resolved) lies under one of `roots` (resolved here).
fn within(target: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| target.starts_with(resolve(r)))
}

/// The kernel's Landlock ABI version; 0 = none (or not Linux).
pub fn landlock_abi() -> i32 {
    #[cfg(target_os = "linux")]
    {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
        // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        i32::try_from(v).unwrap_or(0).max(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Wraps the built-in file tool `tool` (named `name`) so that its `path` argument is checked
/// against `policy` before it runs: `write`/`edit` against [`SandboxPolicy::check_write`],
/// `read`/`grep`/`find`/`ls` against [`SandboxPolicy::check_read`] (an absent or empty `path`
/// is the cwd, as those tools take it). Other tools, and every tool under `full`, come back
/// unchanged. A refused path is an error tool result with the boundary's message.
pub fn guard_tool(
    tool: Arc<dyn AgentTool>,
    name: &str,
    cwd: &Path,
    policy: SandboxPolicy,
) -> Arc<dyn AgentTool> {
    let write = match name {
        "write" | "edit" => true,
        "read" | "grep" | "find" | "ls" => false,
        _ => return tool,
    };
    if !policy.is_sandboxed() || (!write && policy.read_roots(cwd, None).is_none()) {
        return tool;
    }
    Arc::new(GuardedTool {
        inner: tool,
        cwd: cwd.to_path_buf(),
        policy,
        write,
    })
}

/// A file tool behind the in-process sandbox boundary ([`guard_tool`]).
struct GuardedTool {
    inner: Arc<dyn AgentTool>,
    cwd: PathBuf,
    policy: SandboxPolicy,
    write: bool,
}

#[async_trait]
impl AgentTool for GuardedTool {
    fn definition(&self) -> ToolDefinition {
        self.inner.definition()
    }

    fn prepare_arguments(&self, args: Value) -> Value {
        self.inner.prepare_arguments(args)
    }

    async fn execute(&self, ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let arg = super::util::arg_str(&args, "path")
            .filter(|s| !s.is_empty())
            .unwrap_or(".");
        let abs = super::util::resolve_to_cwd(arg, &self.cwd);
        let checked = if self.write {
            self.policy.check_write(&self.cwd, &abs)
        } else {
            self.policy.check_read(&self.cwd, &abs)
        };
        checked.map_err(ToolError::from)?;
        self.inner.execute(ctx, args).await
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{SandboxMode, SandboxPolicy, WRITE_DEVICES};
    use landlock::{
        path_beneath_rules, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible,
        Ruleset, RulesetAttr, RulesetCreatedAttr, ABI,
    };
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    use std::collections::BTreeMap;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    use std::path::Path;

    pub(super) fn apply(
        policy: SandboxPolicy,
        cmd: &mut std::process::Command,
        cwd: &Path,
        shell: &Path,
    ) -> Result<(), String> {
        policy.check_available()?;
        let ruleset = ruleset(policy, cwd, shell).map_err(|e| format!("Sandbox: {e}"))?;
        let filter = if policy.network {
            Vec::new()
        } else {
            socket_filter().map_err(|e| format!("Sandbox: {e}"))?
        };
        let drop_caps: &'static [u32] = if policy.network {
            &ADMIN_CAPS
        } else {
            &ADMIN_AND_NET_CAPS
        };
        let mut hook = ChildHook {
            ruleset,
            filter,
            drop_caps,
        };
        // SAFETY: the hook only makes async-signal-safe system calls (prctl,
        // landlock_restrict_self, seccomp) on data built before the fork; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || hook.run());
        }
        Ok(())
    }

    /// Capabilities a sandboxed command never gets, even run by root: loading kernel modules
    /// and the administrative grab-bag (`CAP_SYS_MODULE` 16, `CAP_SYS_ADMIN` 21). Dropped
    /// from the bounding set before `exec`, so the shell and everything it starts lack them.
    const ADMIN_CAPS: [u32; 2] = [16, 21];
    /// [`ADMIN_CAPS`] plus, with the network off, `CAP_NET_ADMIN` (12: interfaces, routes,
    /// firewall, which a root shell could otherwise change over netlink) and `CAP_NET_RAW`
    /// (13). A tester found `ip addr add` working under `workspace-write` as root.
    const ADMIN_AND_NET_CAPS: [u32; 4] = [12, 13, 16, 21];

    /// What the child applies to itself before `exec`.
    struct ChildHook {
        ruleset: OwnedFd,
        filter: BpfProgram,
        drop_caps: &'static [u32],
    }

    impl ChildHook {
        fn run(&mut self) -> std::io::Result<()> {
            // SAFETY: plain system calls on the calling (forked, single-threaded) process; the
            // filter outlives the call.
            unsafe {
                for &cap in self.drop_caps {
                    // EPERM without CAP_SETPCAP (not root: the capability is not held
                    // anyway), EINVAL for one the kernel does not know: both leave nothing
                    // to drop.
                    libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
                }
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(
                    libc::SYS_landlock_restrict_self,
                    self.ruleset.as_raw_fd(),
                    0u32,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                if !self.filter.is_empty() {
                    let prog = libc::sock_fprog {
                        len: u16::try_from(self.filter.len()).unwrap_or(u16::MAX),
                        // Both are `struct sock_filter` of linux/filter.h (repr(C)).
                        filter: self.filter.as_mut_ptr().cast::<libc::sock_filter>(),
                    };
                    if libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        0u32,
                        &prog as *const libc::sock_fprog,
                    ) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
            }
            Ok(())
        }
    }

    /// The Landlock ruleset of `policy` as a file descriptor (close-on-exec, as the kernel
    /// creates it).
    fn ruleset(policy: SandboxPolicy, cwd: &Path, shell: &Path) -> Result<OwnedFd, String> {
        build_ruleset(policy, cwd, shell)
            .and_then(|fd| fd.ok_or_else(|| "no Landlock ruleset".into()))
    }

    fn build_ruleset(
        policy: SandboxPolicy,
        cwd: &Path,
        shell: &Path,
    ) -> Result<Option<OwnedFd>, String> {
        build(policy, cwd, shell).map_err(|e| e.to_string())
    }

    fn build(
        policy: SandboxPolicy,
        cwd: &Path,
        shell: &Path,
    ) -> Result<Option<OwnedFd>, landlock::RulesetError> {
        let abi = ABI::V3;
        let read = AccessFs::from_read(abi);
        let write = AccessFs::from_write(abi);
        let device = make_device_access();
        let handled: BitFlags<AccessFs> = match policy.mode {
            // Reads stay unrestricted: only write rights are handled.
            SandboxMode::WorkspaceWrite => write,
            _ => AccessFs::from_all(abi),
        };
        let mut rs = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(handled)?;
        if !policy.network {
            rs = rs.handle_access(AccessNet::from_all(ABI::V4))?;
        }
        let mut created = rs.create()?;
        if let Some(roots) = policy.write_roots(cwd) {
            created = created.add_rules(path_beneath_rules(&roots, write & handled))?;
        }
        if let Some(roots) = policy.read_roots(cwd, Some(shell)) {
            created = created.add_rules(path_beneath_rules(&roots, read))?;
        }
        created = created.add_rules(path_beneath_rules(WRITE_DEVICES, device & handled))?;
        // No network rule: with the network off, every TCP bind and connect is denied.
        Ok(created.into())
    }

    /// Rights on [`WRITE_DEVICES`]: read, write and open with `O_TRUNC` (`> /dev/null`).
    fn make_device_access() -> BitFlags<AccessFs> {
        AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate
    }

    /// seccomp: `EACCES` for the sockets Landlock has no rule for (UDP, raw, other
    /// protocols of `AF_INET`/`AF_INET6`, `AF_PACKET`), and for `io_uring_setup`.
    fn socket_filter() -> Result<BpfProgram, String> {
        socket_filter_rules().map_err(|e| e.to_string())
    }

    fn socket_filter_rules() -> Result<BpfProgram, seccompiler::BackendError> {
        let arch = if cfg!(target_arch = "x86_64") {
            TargetArch::x86_64
        } else if cfg!(target_arch = "aarch64") {
            TargetArch::aarch64
        } else if cfg!(target_arch = "riscv64") {
            TargetArch::riscv64
        } else {
            return Err(seccompiler::BackendError::InvalidTargetArch(
                std::env::consts::ARCH.to_string(),
            ));
        };
        let cond = |arg: u8, op: SeccompCmpOp, value: u64| {
            SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        };
        let mut socket_rules = Vec::new();
        for domain in [libc::AF_INET, libc::AF_INET6] {
            let domain = domain as u64;
            // Every socket type but SOCK_STREAM (the low 4 bits; the rest are flags).
            for ty in 2..16u64 {
                socket_rules.push(SeccompRule::new(vec![
                    cond(0, SeccompCmpOp::Eq, domain)?,
                    cond(1, SeccompCmpOp::MaskedEq(0xf), ty)?,
                ])?);
            }
            // SOCK_STREAM of another protocol than 0 / IPPROTO_TCP (SCTP, MPTCP).
            socket_rules.push(SeccompRule::new(vec![
                cond(0, SeccompCmpOp::Eq, domain)?,
                cond(2, SeccompCmpOp::Ne, 0)?,
                cond(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
            ])?);
        }
        socket_rules.push(SeccompRule::new(vec![cond(
            0,
            SeccompCmpOp::Eq,
            libc::AF_PACKET as u64,
        )?])?);
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        rules.insert(libc::SYS_socket, socket_rules.clone());
        #[cfg(target_arch = "x86_64")]
        {
            // The x32 ABI's numbers (bit 30) share the x86_64 audit arch.
            const X32: i64 = 0x4000_0000;
            rules.insert(libc::SYS_socket | X32, socket_rules);
        }
        // No rule = always: io_uring's socket operation would pass by the socket() rules.
        rules.insert(libc::SYS_io_uring_setup, Vec::new());
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EACCES as u32),
            arch,
        )?;
        filter.try_into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(v: Value, cli: Option<&str>) -> Result<SandboxPolicy, String> {
        SandboxPolicy::from_setting(Some(&v), cli)
    }

    #[test]
    fn parses_setting_and_cli_override() {
        assert_eq!(
            SandboxPolicy::from_setting(None, None).unwrap(),
            SandboxPolicy::default()
        );
        let p = from(json!({"mode": "read-only", "network": true}), None).unwrap();
        assert_eq!(p.mode, SandboxMode::ReadOnly);
        assert!(p.network);
        let p = from(json!({"mode": "read-only"}), Some("workspace-write")).unwrap();
        assert_eq!(p.mode, SandboxMode::WorkspaceWrite);
        assert!(!p.network_allowed());
        assert!(from(json!({"mode": "nope"}), None).is_err());
        // A misspelt key is an error, not a sandbox silently off (tester finding).
        assert!(from(json!({"mdoe": "read-only"}), None).is_err());
        assert!(from(json!({"mode": "read-only", "extra": 1}), None).is_err());
        assert!(from(json!("full"), None).is_err());
        assert!(SandboxPolicy::from_setting(None, Some("x")).is_err());
        assert_eq!(
            SandboxPolicy::default().to_json(),
            json!({"mode": "full", "network": true})
        );
    }

    #[test]
    fn write_boundary_resolves_symlinks_and_dotdot() {
        // Under the build's target dir: neither /tmp nor the temp dir (both allowed).
        let base =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let cwd = base.path().join("cwd");
        std::fs::create_dir(&cwd).unwrap();
        let outside = base.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, cwd.join("link")).unwrap();
        let p = SandboxPolicy {
            mode: SandboxMode::WorkspaceWrite,
            ..SandboxPolicy::default()
        };
        assert!(p.check_write(&cwd, Path::new("a/b/new.txt")).is_ok());
        assert!(p.check_write(&cwd, Path::new("/dev/null")).is_ok());
        assert!(p.check_write(&cwd, Path::new("link/x")).is_err());
        assert!(p.check_write(&cwd, Path::new("new/../../x")).is_err());
        assert!(p.check_write(&cwd, Path::new("/etc/passwd")).is_err());
        // A dangling link: writing through it creates its target outside (the tester's
        // escape: `ln -s <outside>/f dang`, then `write dang`).
        std::os::unix::fs::symlink(outside.join("f"), cwd.join("dang")).unwrap();
        assert!(p.check_write(&cwd, Path::new("dang")).is_err());
        // A chain of two, the last dangling; a relative target; a loop (refused).
        std::os::unix::fs::symlink("dang", cwd.join("chain")).unwrap();
        assert!(p.check_write(&cwd, Path::new("chain")).is_err());
        std::os::unix::fs::symlink("../outside/g", cwd.join("rel")).unwrap();
        assert!(p.check_write(&cwd, Path::new("rel")).is_err());
        std::os::unix::fs::symlink("inside.txt", cwd.join("ok")).unwrap();
        assert!(p.check_write(&cwd, Path::new("ok")).is_ok());
        std::os::unix::fs::symlink("loop2", cwd.join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", cwd.join("loop2")).unwrap();
        assert!(p.check_write(&cwd, Path::new("loop1")).is_err());
        assert_eq!(resolve_links(&cwd.join("loop1")), None);
        let ro = SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            ..SandboxPolicy::default()
        };
        assert!(ro.check_write(&cwd, Path::new("a.txt")).is_err());
        assert!(ro.check_read(&cwd, Path::new("a.txt")).is_ok());
        assert!(ro.check_read(&cwd, Path::new("/etc/hostname")).is_ok());
        assert!(ro.check_read(&cwd, &outside).is_err());
        assert!(ro.check_read(&cwd, Path::new("link/x")).is_err());
    }
}
