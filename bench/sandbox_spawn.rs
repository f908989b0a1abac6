//! Per-call cost of the bash tool's kernel sandbox (issue 26): `echo hi` run N times (default
//! 200) through the shell engine (`run_shell`, the bash tool's spawn path: process group,
//! supervisor, output pipe) unsandboxed, under `workspace-write` with the network off (Landlock
//! ruleset built per call + seccomp filter) and under `read-only`, interleaved in rounds of 10.
//! Prints the mean and median wall time per call for each.
//!
//! ```text
//! cargo run -p pi-coding-agent --no-default-features --example sandbox_spawn [-- N]
//! ```

use pi_coding_agent::tools::sandbox::{SandboxMode, SandboxPolicy};
use pi_coding_agent::tools::shell::{run_shell, ShellCommand, ShellExit};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

async fn once(cmd: &ShellCommand) -> Result<Duration, String> {
    let cancel = CancellationToken::new();
    let mut out = Vec::new();
    let mut sink = |b: &[u8]| out.extend_from_slice(b);
    let t = Instant::now();
    let exit = run_shell(cmd, &cancel, &mut sink).await;
    let d = t.elapsed();
    if exit != Ok(ShellExit::Exited(Some(0))) || out != b"hi\n" {
        return Err(format!(
            "echo hi gave {exit:?}, output {:?}",
            String::from_utf8_lossy(&out)
        ));
    }
    Ok(d)
}

fn summary(name: &str, mut v: Vec<Duration>) {
    if v.is_empty() {
        return;
    }
    v.sort();
    let mean = v.iter().sum::<Duration>() / v.len() as u32;
    let median = v[v.len() / 2];
    println!(
        "{name:<28} n={:<4} mean {:>7.3} ms  median {:>7.3} ms",
        v.len(),
        mean.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let make = |mode, network| ShellCommand {
        command: "echo hi".into(),
        cwd: cwd.clone(),
        shell: None,
        env: None,
        timeout: None,
        sandbox: SandboxPolicy {
            mode,
            network,
            user_bash: false,
        },
    };
    let variants = [
        ("unsandboxed (full)", make(SandboxMode::Full, true)),
        (
            "workspace-write, no network",
            make(SandboxMode::WorkspaceWrite, false),
        ),
        ("read-only, no network", make(SandboxMode::ReadOnly, false)),
    ];
    for (_, c) in &variants {
        once(c).await?; // warm-up
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let mut done = 0;
    while done < n {
        let k = 10.min(n - done);
        for (i, (_, c)) in variants.iter().enumerate() {
            for _ in 0..k {
                times[i].push(once(c).await?);
            }
        }
        done += k;
    }
    for ((name, _), t) in variants.iter().zip(times) {
        summary(name, t);
    }
    Ok(())
}
