//! `outrigger run`: a headless one-shot turn. It is a minimal host: it starts this same
//! binary in serve mode over pipes, sends one `agent.chat.stream`, prints every frame the
//! host receives for it (JSON lines on stdout), then shuts the sidecar down. Exit code 0
//! when the turn completed, 1 otherwise, 2 on a usage or startup error.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The scripted provider's script (JSON Lines, one model turn per line); implies
    /// `--provider scripted`.
    #[arg(long, value_name = "PATH")]
    pub script: Option<PathBuf>,
    /// Provider for a real model (`openai_compat`, `ollama`, …); the key comes from
    /// OUTRIGGER_API_KEY.
    #[arg(long)]
    pub provider: Option<String>,
    #[arg(long, default_value = "")]
    pub model: String,
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Workspace the file tools and bash work in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Record id of the durable session (default: a fresh one per run).
    #[arg(long)]
    pub chat_id: Option<String>,
    /// The user message.
    pub prompt: String,
}

fn fail(msg: String) -> i32 {
    eprintln!("outrigger run: {msg}");
    2
}

fn absolute(p: PathBuf) -> Result<PathBuf, String> {
    std::path::absolute(&p).map_err(|e| format!("cannot resolve {}: {e}", p.display()))
}

/// Runs the turn; `storage_path` is passed on to the child sidecar.
pub fn run(args: RunArgs, storage_path: Option<PathBuf>) -> i32 {
    let cwd = match args.cwd.map_or_else(std::env::current_dir, Ok) {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot read the current directory: {e}")),
    };
    let cwd = match absolute(cwd) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let mut params = json!({
        "model": if args.model.is_empty() { "scripted" } else { &args.model },
        "cwd": cwd,
        "messages": [{"role": "user", "content": args.prompt}],
    });
    match (&args.script, &args.provider) {
        (Some(s), None) => match absolute(s.clone()) {
            Ok(p) => {
                params["provider"] = json!("scripted");
                params["scriptPath"] = json!(p);
            }
            Err(e) => return fail(e),
        },
        (None, Some(p)) => {
            params["provider"] = json!(p);
            if let Some(u) = &args.base_url {
                params["baseUrl"] = json!(u);
            }
        }
        _ => return fail("give either --script PATH or --provider NAME --model M".into()),
    }
    if let Some(c) = &args.chat_id {
        params["chatId"] = json!(c);
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return fail(format!("cannot find this executable: {e}")),
    };
    let mut cmd = Command::new(exe);
    cmd.arg("--quiet-ready");
    if let Some(p) = storage_path {
        cmd.arg("--storage-path").arg(p);
    }
    let mut child = match cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot start the sidecar: {e}")),
    };
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return fail("the sidecar's pipes are missing".into());
    };
    let request =
        json!({"jsonrpc": "2.0", "id": 1, "method": "agent.chat.stream", "params": params});
    if writeln!(stdin, "{request}")
        .and_then(|()| stdin.flush())
        .is_err()
    {
        return fail("the sidecar exited before taking the request".into());
    }
    let mut code = 1;
    // `outrigger run` is a host: it prints the frames it receives.
    let mut out = std::io::stdout().lock(); // stdout-ok
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(out, "{line}");
        let Ok(frame) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let finished = if frame.get("id") == Some(&json!(1)) && frame.get("error").is_some() {
            true
        } else if frame["method"] == "stream.done" {
            code = if frame["params"]["ok"] == true { 0 } else { 1 };
            true
        } else {
            false
        };
        if finished {
            let bye = json!({"jsonrpc": "2.0", "id": 2, "method": "system.shutdown"});
            let _ = writeln!(stdin, "{bye}").and_then(|()| stdin.flush());
        }
        if frame["method"] == "lifecycle.shutdown" {
            break;
        }
    }
    drop(stdin);
    let _ = out.flush();
    let _ = child.wait();
    code
}
