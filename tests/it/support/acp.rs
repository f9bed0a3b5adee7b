//! Drives `outrigger acp` with a real ACP client: the Python SDK (`agent-client-protocol`,
//! pinned by `scripts/mcp-test-servers`) in `tests/fixtures/acp/client.py`. The driver spawns
//! the agent, runs a scenario of steps, closes the agent's stdin, and prints one JSON object
//! with everything it observed; `Observed` wraps that object with accessors for the tests.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{BIN, wait_until};
use crate::support::mcp_deps::mcp_venv_python;

/// The driver's own bound on a scenario (it cuts the run short and reports past it).
pub const SCENARIO_SECS: u64 = 120;
/// How long the test waits for the driver before killing it: the scenario bound plus the
/// driver's exit ladder (stdin close, SIGTERM, SIGKILL) and some slack.
const DRIVER_DEADLINE: Duration = Duration::from_secs(SCENARIO_SECS + 60);

pub fn client_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp/client.py")
}

/// `tests/fixtures/mcp/fake_server.py`.
pub fn fake_mcp_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/fake_server.py")
}

/// A temp directory, canonical (the agent reports absolute paths; compare like with like).
pub struct Dir {
    _tmp: tempfile::TempDir,
    pub path: PathBuf,
}

impl Default for Dir {
    fn default() -> Self {
        Self::new()
    }
}

impl Dir {
    pub fn new() -> Dir {
        let tmp = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(tmp.path()).unwrap();
        Dir { _tmp: tmp, path }
    }

    pub fn s(&self) -> &str {
        self.path.to_str().unwrap()
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

/// What the driver printed, plus what the test saw around it.
pub struct Observed {
    pub v: Value,
    /// The driver's own stderr (Python warnings, tracebacks).
    pub driver_stderr: String,
    /// Processes still alive 5 s after the driver exited that mention the home or a session
    /// cwd (in their arguments or environment, or as their working directory). They are
    /// killed after being recorded.
    pub leftovers: Vec<String>,
}

/// Runs the driver: `client.py --scenario JSON -- outrigger AGENT_ARGS...`, with the
/// environment cleared like `common::base_command` (PATH kept, `HOME` and `OUTRIGGER_HOME` the
/// given home) plus `env`. Returns once the driver exited and printed its object.
pub fn drive(home: &Path, agent_args: &[&str], env: &[(&str, &str)], scenario: &Value) -> Observed {
    let mut scenario = scenario.clone();
    if scenario.is_array() {
        scenario = json!({"steps": scenario});
    }
    scenario["timeoutSecs"] = json!(SCENARIO_SECS);
    let mut cmd = Command::new(mcp_venv_python());
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("OUTRIGGER_HOME", home);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.arg(client_py())
        .arg("--scenario")
        .arg(scenario.to_string())
        .arg("--")
        .arg(BIN)
        .args(agent_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn the ACP driver");
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + DRIVER_DEADLINE;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the ACP driver did not exit within {DRIVER_DEADLINE:?}; stderr:\n{}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap();
    let driver_stderr = err.join().unwrap();
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the ACP driver printed no JSON object ({e}; exit {status}):\nstdout:\n{stdout}\nstderr:\n{driver_stderr}"
        )
    });
    let mut markers = vec![home.display().to_string()];
    for step in v_steps(&scenario) {
        if let Some(cwd) = step["cwd"].as_str() {
            markers.push(cwd.to_string());
        }
    }
    let mut leftovers = Vec::new();
    wait_until(Duration::from_secs(5), || {
        leftovers = live_mentioning(&markers);
        leftovers.is_empty()
    });
    for l in &leftovers {
        if let Some(pid) = l
            .split_whitespace()
            .next()
            .and_then(|p| p.parse::<i32>().ok())
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    Observed {
        v,
        driver_stderr,
        leftovers,
    }
}

fn v_steps(scenario: &Value) -> Vec<Value> {
    scenario["steps"].as_array().cloned().unwrap_or_default()
}

/// Live (not zombie) processes, other than this one, that mention one of `markers` in their
/// arguments or environment or whose working directory is under one: "PID CMDLINE".
pub fn live_mentioning(markers: &[String]) -> Vec<String> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // The state follows the parenthesised command name.
        let state = stat
            .rsplit_once(')')
            .map(|(_, r)| r.trim_start().chars().next());
        if state == Some(Some('Z')) {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
        let hit = markers.iter().any(|m| {
            contains(&cmdline, m.as_bytes())
                || contains(&environ, m.as_bytes())
                || cwd.starts_with(m)
        });
        if hit {
            let shown = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            out.push(format!("{pid} {shown}"));
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// `agent_message_chunk` and friends carry a content block; its text.
pub fn chunk_text(update: &Value) -> String {
    update["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

impl Observed {
    /// For assertion messages: the whole object (long strings kept), the driver's stderr.
    pub fn dump(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.v).unwrap();
        if s.len() > 60_000 {
            let cut = (0..=60_000).rev().find(|&i| s.is_char_boundary(i)).unwrap();
            s.truncate(cut);
            s.push_str("\n…(cut)");
        }
        format!(
            "observed:\n{s}\ndriver stderr:\n{}\nleftovers: {:?}",
            self.driver_stderr, self.leftovers
        )
    }

    pub fn step(&self, i: usize) -> &Value {
        let steps = self.v["steps"].as_array().unwrap();
        steps
            .iter()
            .find(|s| s["index"] == i)
            .unwrap_or_else(|| panic!("step {i} never ran\n{}", self.dump()))
    }

    /// The step's result; fails the test when the step failed.
    pub fn ok(&self, i: usize) -> &Value {
        let s = self.step(i);
        assert_eq!(
            s["ok"],
            true,
            "step {i} ({}) failed: {}\n{}",
            s["op"],
            s["error"],
            self.dump()
        );
        &s["result"]
    }

    /// The step's error; fails the test when the step succeeded.
    pub fn err(&self, i: usize) -> &Value {
        let s = self.step(i);
        assert_eq!(
            s["ok"],
            false,
            "step {i} ({}) succeeded: {}\n{}",
            s["op"],
            s["result"],
            self.dump()
        );
        &s["error"]
    }

    /// The raw response frame (`{seq, step, id, result | error}`) that arrived during step `i`.
    pub fn raw_response(&self, i: usize) -> &Value {
        self.v["responses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["step"] == i)
            .unwrap_or_else(|| panic!("no response during step {i}\n{}", self.dump()))
    }

    /// The session id a `new_session`/`load_session` step produced.
    pub fn session_id(&self, i: usize) -> String {
        self.ok(i)["sessionId"].as_str().unwrap().to_string()
    }

    /// Every update entry `{seq, step, sessionId, update}`.
    pub fn entries(&self) -> Vec<&Value> {
        self.v["updates"].as_array().unwrap().iter().collect()
    }

    /// The updates that arrived during step `i`, in order.
    pub fn updates_in(&self, i: usize) -> Vec<&Value> {
        self.entries()
            .into_iter()
            .filter(|e| e["step"] == i)
            .map(|e| &e["update"])
            .collect()
    }

    /// The updates of one kind (`sessionUpdate`) during step `i`.
    pub fn kind_in(&self, i: usize, kind: &str) -> Vec<&Value> {
        self.updates_in(i)
            .into_iter()
            .filter(|u| u["sessionUpdate"] == kind)
            .collect()
    }

    /// The text of the chunks of one kind during step `i`, concatenated.
    pub fn text_in(&self, i: usize, kind: &str) -> String {
        self.kind_in(i, kind).into_iter().map(chunk_text).collect()
    }

    /// The `tool_call` of `id` during step `i` (exactly one).
    pub fn tool_call(&self, i: usize, id: &str) -> &Value {
        let calls: Vec<&Value> = self
            .kind_in(i, "tool_call")
            .into_iter()
            .filter(|u| u["toolCallId"] == id)
            .collect();
        assert_eq!(
            calls.len(),
            1,
            "step {i}: one tool_call {id} expected\n{}",
            self.dump()
        );
        calls[0]
    }

    /// The `tool_call_update`s of `id` during step `i`.
    pub fn tool_updates(&self, i: usize, id: &str) -> Vec<&Value> {
        self.kind_in(i, "tool_call_update")
            .into_iter()
            .filter(|u| u["toolCallId"] == id)
            .collect()
    }

    /// The last `tool_call_update` of `id` during step `i` that carries a final status.
    pub fn final_update(&self, i: usize, id: &str) -> &Value {
        self.tool_updates(i, id)
            .into_iter()
            .rfind(|u| u["status"] == "completed" || u["status"] == "failed")
            .unwrap_or_else(|| {
                panic!(
                    "step {i}: no completed/failed tool_call_update for {id}\n{}",
                    self.dump()
                )
            })
    }

    /// The client's fs requests `{step, method, sessionId, path, …, served}` (scenario `fs`).
    pub fn fs_requests(&self) -> Vec<&Value> {
        self.v["fsRequests"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    }

    /// The fs requests for `method` (`fs/read_text_file`, `fs/write_text_file`).
    pub fn fs_requests_of(&self, method: &str) -> Vec<&Value> {
        self.fs_requests()
            .into_iter()
            .filter(|r| r["method"] == method)
            .collect()
    }

    /// The `elicitation/create` requests as the client handled them (scenario `elicitation`).
    pub fn elicitation_requests(&self) -> Vec<&Value> {
        self.v["elicitationRequests"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    }

    /// The raw params of every request the agent sent for `method`, in order.
    pub fn agent_requests(&self, method: &str) -> Vec<&Value> {
        self.v["agentRequests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == method)
            .map(|r| &r["params"])
            .collect()
    }

    pub fn permission_requests(&self) -> Vec<&Value> {
        self.v["permissionRequests"]
            .as_array()
            .unwrap()
            .iter()
            .collect()
    }

    /// The prompt step's stop reason; fails when it answered an error.
    pub fn stop_reason(&self, i: usize) -> String {
        self.ok(i)["stopReason"]
            .as_str()
            .unwrap_or_else(|| panic!("step {i}: no stopReason\n{}", self.dump()))
            .to_string()
    }

    /// The hygiene every run must show: the scenario ran to its end, stdout carried only
    /// JSON-RPC frames, the SDK accepted every frame and update, the agent made no request
    /// besides permissions (no fs/terminal: not advertised), it exited on its own with code 0
    /// once its stdin closed, and nothing it started is still running.
    pub fn assert_clean(&self) {
        self.assert_clean_allowing(&[]);
    }

    /// `assert_clean`, for a client that advertised more: requests for `methods` (say
    /// `fs/read_text_file`, `elicitation/create`) are allowed besides permissions.
    pub fn assert_clean_allowing(&self, methods: &[&str]) {
        let v = &self.v;
        assert!(
            v.get("fatal").is_none(),
            "cut short: {}\n{}",
            v["fatal"],
            self.dump()
        );
        assert_eq!(
            v["badStdoutLines"],
            json!([]),
            "stdout lines that are not JSON-RPC frames\n{}",
            self.dump()
        );
        assert_eq!(
            v["clientErrors"],
            json!([]),
            "the ACP SDK logged errors\n{}",
            self.dump()
        );
        assert_eq!(
            v["sdkUpdates"].as_u64().unwrap() as usize,
            self.entries().len(),
            "the SDK refused some session/update notifications\n{}",
            self.dump()
        );
        for r in v["agentRequests"].as_array().unwrap() {
            let m = r["method"].as_str().unwrap_or_default();
            assert!(
                m == "session/request_permission" || methods.contains(&m),
                "an unexpected request to the client: {m}\n{}",
                self.dump()
            );
        }
        let exit = &v["agentExit"];
        assert_eq!(
            exit["exitedOnItsOwn"],
            true,
            "the agent did not exit after its stdin closed\n{}",
            self.dump()
        );
        assert_eq!(exit["code"], 0, "agent exit code\n{}", self.dump());
        assert_eq!(v["stdoutEof"], true, "{}", self.dump());
        assert_eq!(
            v["stderrEof"],
            true,
            "something the agent started still holds its stderr\n{}",
            self.dump()
        );
        assert!(
            self.leftovers.is_empty(),
            "processes left behind: {:?}\n{}",
            self.leftovers,
            self.dump()
        );
    }
}
