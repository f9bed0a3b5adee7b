//! The approval layer (reference §3.2, issue "host interaction"): in `host` mode every call
//! whose mode is `local` or `destructive` is put to the host (`approval.request`) before it
//! runs. This file owns the vocabulary (modes, decisions), the category a decision is keyed
//! by (the tool's mode, or for `bash` the command's program names), the host's answer
//! parsing (fail closed) and the per-session rules. `*_always` rules live in the store.

use crate::strict::Invalid;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::exec::Approval;
use super::params::LOCAL_TOOLS;
use super::persist;
use super::run::Turn;
use crate::host::HostError;
use crate::llm::ToolCall;
use crate::protocol::host::ApprovalRequest;
use crate::tools::{ToolMode, ToolResult};

/// Default bound on one `approval.request` (a person has to read and decide).
pub const DEFAULT_APPROVAL_TIMEOUT_MS: u64 = 300_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every call runs without asking (the default).
    Auto,
    /// `local` and `destructive` calls are put to the host first.
    Host,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "auto" => Some(Mode::Auto),
            "host" => Some(Mode::Host),
            _ => None,
        }
    }
}

/// A turn's resolved approval settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub mode: Mode,
    pub timeout: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            mode: Mode::Auto,
            timeout: Duration::from_millis(DEFAULT_APPROVAL_TIMEOUT_MS),
        }
    }
}

/// Whether a call of this mode needs the host's approval in `host` mode.
pub fn needs_approval(mode: ToolMode) -> bool {
    matches!(mode, ToolMode::Local | ToolMode::Destructive)
}

/// The host's decision kinds: the wire type itself, so the two cannot drift apart.
pub use crate::protocol::host::ApprovalKind as Decision;

impl Decision {
    pub const ALL: [Decision; 8] = [
        Decision::AllowOnce,
        Decision::AllowForSession,
        Decision::AllowAlways,
        Decision::DenyOnce,
        Decision::DenyForSession,
        Decision::DenyAlways,
        Decision::Abort,
        Decision::TimedOut,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Decision::AllowOnce => "allow_once",
            Decision::AllowForSession => "allow_for_session",
            Decision::AllowAlways => "allow_always",
            Decision::DenyOnce => "deny_once",
            Decision::DenyForSession => "deny_for_session",
            Decision::DenyAlways => "deny_always",
            Decision::Abort => "abort",
            Decision::TimedOut => "timed_out",
        }
    }

    pub fn parse(s: &str) -> Option<Decision> {
        Decision::ALL.into_iter().find(|d| d.as_str() == s)
    }

    pub fn allows(self) -> bool {
        matches!(
            self,
            Decision::AllowOnce | Decision::AllowForSession | Decision::AllowAlways
        )
    }
}

/// The host's answer to `approval.request`.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub decision: Decision,
    pub reason: Option<String>,
    /// Replacement arguments (re-validated against the tool's schema before they run).
    pub amendment: Option<Map<String, Value>>,
}

/// Parses `{kind, reason?, amendment?}` (`decision` is accepted for `kind`). Anything else
/// is malformed, which the caller turns into `deny_once` (fail closed).
pub fn parse_answer(v: &Value) -> Result<Answer, Invalid> {
    let Value::Object(o) = v else {
        return Err("the answer is not an object {kind, reason?, amendment?}".into());
    };
    let kind = o
        .get("kind")
        .or_else(|| o.get("decision"))
        .and_then(Value::as_str)
        .ok_or("the answer has no string `kind`")?;
    let decision = Decision::parse(kind).ok_or_else(|| {
        format!(
            "unknown decision kind '{kind}' (expected one of {})",
            Decision::ALL.map(Decision::as_str).join(", ")
        )
    })?;
    let reason = match o.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("`reason` must be a string".into()),
    };
    let amendment = match o.get("amendment") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) if decision.allows() => Some(m.clone()),
        Some(Value::Object(_)) => {
            return Err(Invalid::from(format!(
                "an amendment only goes with an allow decision, not '{kind}'"
            )));
        }
        Some(_) => return Err("`amendment` must be an object of replacement arguments".into()),
    };
    Ok(Answer {
        decision,
        reason,
        amendment,
    })
}

/// Shell words that introduce structure rather than name a program.
const SHELL_KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time",
    "esac", "in",
];
/// Segments that start with these are not commands (`for x in …`, `case … in`).
const SHELL_HEADERS: &[&str] = &["for", "case", "select", "function"];

/// The program names a bash command line runs, in order of first appearance: the first
/// word of every simple command (after `;`, `&`, `|`, newlines, `(`, `$(` and backticks),
/// skipping `NAME=value` assignments and shell keywords, with any directory stripped.
/// Quotes and backslashes are honoured, so `echo "a; rm b"` runs only `echo`.
pub fn bash_programs(command: &str) -> Vec<String> {
    programs_at(command, 0)
}

/// Command substitutions inside double quotes nest at most this deep before the rest is
/// reported as `NESTED` (a crafted line must not exhaust the stack, and a decision for
/// `echo` must not cover whatever hides that deep).
const MAX_NESTING: usize = 8;
/// The program name reported for substitutions nested past `MAX_NESTING`.
pub const NESTED: &str = "(nested substitution)";

fn programs_at(command: &str, depth: usize) -> Vec<String> {
    if depth > MAX_NESTING {
        return vec![NESTED.to_string()];
    }
    let mut segments: Vec<Vec<String>> = vec![Vec::new()];
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    let flush = |segments: &mut Vec<Vec<String>>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            if let Some(s) = segments.last_mut() {
                s.push(std::mem::take(word));
            }
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    word.push(n);
                    in_word = true;
                }
            }
            '\'' => {
                in_word = true;
                for n in chars.by_ref() {
                    if n == '\'' {
                        break;
                    }
                    word.push(n);
                }
            }
            '"' => {
                in_word = true;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => break,
                        '\\' => {
                            if let Some(m) = chars.next() {
                                word.push(m);
                            }
                        }
                        // A command substitution inside quotes still runs a program.
                        '$' if chars.peek() == Some(&'(') => {
                            chars.next();
                            let inner: String = chars.by_ref().take_while(|x| *x != ')').collect();
                            for p in programs_at(&inner, depth + 1) {
                                segments.insert(segments.len() - 1, vec![p]);
                            }
                        }
                        '`' => {
                            let inner: String = chars.by_ref().take_while(|x| *x != '`').collect();
                            for p in programs_at(&inner, depth + 1) {
                                segments.insert(segments.len() - 1, vec![p]);
                            }
                        }
                        _ => word.push(n),
                    }
                }
            }
            ';' | '&' | '|' | '\n' | '(' | ')' | '`' => {
                flush(&mut segments, &mut word, &mut in_word);
                segments.push(Vec::new());
            }
            '$' if chars.peek() == Some(&'(') => {
                chars.next();
                flush(&mut segments, &mut word, &mut in_word);
                segments.push(Vec::new());
            }
            '<' | '>' => {
                // A redirection's target is a file, not a program: drop the next word.
                flush(&mut segments, &mut word, &mut in_word);
                while chars.peek().is_some_and(|x| matches!(x, '>' | '&' | '<')) {
                    chars.next();
                }
                while chars
                    .peek()
                    .is_some_and(|x| x.is_whitespace() && *x != '\n')
                {
                    chars.next();
                }
                while chars
                    .peek()
                    .is_some_and(|x| !x.is_whitespace() && !";&|()".contains(*x))
                {
                    chars.next();
                }
            }
            c if c.is_whitespace() => flush(&mut segments, &mut word, &mut in_word),
            '#' if !in_word => {
                // A comment runs to the end of the line.
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
                segments.push(Vec::new());
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    flush(&mut segments, &mut word, &mut in_word);
    let mut out: Vec<String> = Vec::new();
    for seg in segments {
        let mut words = seg.iter().map(String::as_str).peekable();
        if words.peek().is_some_and(|w| SHELL_HEADERS.contains(w)) {
            continue;
        }
        let program =
            words.find(|w| !w.is_empty() && !SHELL_KEYWORDS.contains(w) && !is_assignment(w));
        if let Some(p) = program {
            let name = p.rsplit('/').next().unwrap_or(p).to_string();
            if !name.is_empty() && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The key a decision is remembered by: the tool's mode, except for `bash`, where it is the
/// command's program names joined by `,` (`git`; `cd,rm`), so "allow git for this session"
/// never covers a command line that also runs `rm`.
pub fn category(tool: &str, mode: ToolMode, args: &Map<String, Value>) -> String {
    if tool == "bash" {
        let cmd = args.get("command").and_then(Value::as_str).unwrap_or("");
        let programs = bash_programs(cmd);
        if !programs.is_empty() {
            return programs.join(",");
        }
    }
    mode.as_str().to_string()
}

/// One session's decisions by (tool name, category).
type Rules = HashMap<(String, String), Decision>;

/// `*_for_session` decisions, by session key.
#[derive(Default)]
pub struct SessionRules {
    map: Mutex<HashMap<String, Rules>>,
}

/// Sessions whose rules are kept; the oldest-inserted is dropped past this (bounded memory).
pub const MAX_RULE_SESSIONS: usize = 10_000;

impl SessionRules {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Rules>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, session: &str, tool: &str, category: &str) -> Option<Decision> {
        self.lock()
            .get(session)?
            .get(&(tool.to_string(), category.to_string()))
            .copied()
    }

    pub fn put(&self, session: &str, tool: &str, category: &str, d: Decision) {
        let mut m = self.lock();
        if m.len() >= MAX_RULE_SESSIONS && !m.contains_key(session) {
            // Sessions are not ordered here; dropping any one keeps memory bounded and only
            // costs a repeated question.
            if let Some(k) = m.keys().next().cloned() {
                m.remove(&k);
            }
        }
        m.entry(session.to_string())
            .or_default()
            .insert((tool.to_string(), category.to_string()), d);
    }
}

/// Where a decision came from (the `approval` notice's `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Host,
    SessionRule,
    StoredRule,
    FailClosed,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Host => "host",
            Source::SessionRule => "session_rule",
            Source::StoredRule => "stored_rule",
            Source::FailClosed => "fail_closed",
        }
    }
}

/// The approval layer detached from the turn, so a `run_code` program's nested calls are put
/// to the host like the model's own.
#[derive(Clone)]
pub(super) struct Approver {
    pub agent: std::sync::Arc<super::Agent>,
    pub policy: Policy,
    pub host: std::sync::Arc<dyn crate::host::HostLink>,
    pub emit: super::notices::Emitter,
    pub trace: super::trace::Trace,
    pub cancel: tokio_util::sync::CancellationToken,
    pub session: String,
    pub host_tools: Option<super::host_tools::HostTools>,
    pub router: std::sync::Arc<crate::tools::Router>,
}

impl Turn {
    /// What the approval layer runs with.
    pub(super) fn approver(&self) -> Approver {
        Approver {
            agent: self.agent.clone(),
            policy: self.approval,
            host: self.host.clone(),
            emit: self.emit.clone(),
            trace: self.trace.clone(),
            cancel: self.handle.cancel.clone(),
            session: self.session_key(),
            host_tools: self.p.host_tools.clone(),
            router: self.router().clone(),
        }
    }

    /// The approval layer's verdict on one call of the model's.
    pub(super) async fn approve(&mut self, c: &ToolCall, round: u64) -> Approval {
        if self.approval.mode == Mode::Auto || c.arguments_error.is_some() {
            return Approval::Run(None);
        }
        let mode = self.mode_of(&c.name);
        self.approver().approve(c, mode, round).await
    }
}

impl Approver {
    /// The approval layer's verdict on one call: runs it at once in `auto` mode or when its
    /// mode needs no consent; otherwise a remembered rule decides, or the host is asked
    /// (`approval.request`), failing closed on anything but a well-formed answer.
    pub(super) async fn approve(
        &self,
        c: &ToolCall,
        mode: Option<ToolMode>,
        round: u64,
    ) -> Approval {
        if self.policy.mode == Mode::Auto || c.arguments_error.is_some() {
            return Approval::Run(None);
        }
        let Some(mode) = mode.filter(|m| needs_approval(*m)) else {
            return Approval::Run(None);
        };
        let Value::Object(args) = &c.arguments else {
            // Not an object: dispatch refuses it without running anything.
            return Approval::Run(None);
        };
        let category = category(&c.name, mode, args);
        let session = self.session.clone();
        let remembered = match self.agent.approvals.get(&session, &c.name, &category) {
            Some(d) => Some((d, Source::SessionRule)),
            None => {
                let (tool, cat) = (c.name.clone(), category.clone());
                match persist::call(&self.agent.store, move |s| s.approval_rule(&tool, &cat)).await
                {
                    Ok(found) => found
                        .as_deref()
                        .and_then(Decision::parse)
                        .map(|d| (d, Source::StoredRule)),
                    Err(e) => {
                        tracing::warn!("cannot read stored approval rules: {e}");
                        None
                    }
                }
            }
        };
        let (answer, source) = match remembered {
            Some((decision, source)) => (
                Answer {
                    decision,
                    reason: Some(format!(
                        "{} rule for {} ({category})",
                        decision.as_str(),
                        c.name
                    )),
                    amendment: None,
                },
                source,
            ),
            None => self.ask_host(c, mode, &category, round).await,
        };
        if self.cancel.is_cancelled() {
            return Approval::Denied(ToolResult {
                success: false,
                error: Some("cancelled".into()),
                ..Default::default()
            });
        }
        if source == Source::Host {
            self.remember(&session, &c.name, &category, answer.decision)
                .await;
        }
        let mut n = Map::new();
        n.insert("callId".into(), json!(c.id));
        n.insert("toolName".into(), json!(c.name));
        n.insert("category".into(), json!(category));
        n.insert("decision".into(), json!(answer.decision.as_str()));
        n.insert("source".into(), json!(source.as_str()));
        if let Some(r) = &answer.reason {
            n.insert("reason".into(), json!(r));
        }
        if answer.amendment.is_some() {
            n.insert("amended".into(), json!(true));
        }
        n.insert("kind".into(), json!("approval"));
        let n = Value::Object(n);
        self.trace.event("approval", "approval", Some(n.clone()));
        self.emit.notice(n);
        match answer.decision {
            Decision::Abort => Approval::Abort,
            d if d.allows() => match answer.amendment {
                None => Approval::Run(None),
                Some(a) => match self.validate_amendment(&c.name, &a) {
                    Ok(()) => Approval::Run(Some(a)),
                    Err(e) => Approval::Denied(
                        ToolResult::recoverable(format!(
                            "the host's amended arguments for '{}' are invalid, so it did not run: {e}",
                            c.name
                        ))
                        .with_data("decision", d.as_str())
                        .with_data("amendment", Value::Object(a)),
                    ),
                },
            },
            d => {
                let reason = answer
                    .reason
                    .unwrap_or_else(|| "the host denied this call".to_string());
                let mut r = ToolResult::recoverable("approval_denied")
                    .with_data("decision", d.as_str())
                    .with_data("category", category)
                    .with_data("reason", reason.clone());
                r.message = Some(format!(
                    "Not run: {reason}. Do not retry the same call; choose another way or ask the user."
                ));
                Approval::Denied(r)
            }
        }
    }

    async fn ask_host(
        &self,
        c: &ToolCall,
        mode: ToolMode,
        category: &str,
        round: u64,
    ) -> (Answer, Source) {
        let params = json!(ApprovalRequest {
            tool_name: c.name.clone(),
            arguments: c.arguments.clone(),
            mode: mode.as_str().to_string(),
            category: category.to_string(),
            round,
            stream_id: self.emit.stream_id.clone(),
            call_id: c.id.clone(),
        });
        let got = self
            .host
            .call(
                "approval.request",
                params,
                self.policy.timeout,
                &self.cancel,
            )
            .await;
        let closed = |why: String| {
            (
                Answer {
                    decision: Decision::DenyOnce,
                    reason: Some(format!("denied because {why} (approvals fail closed)")),
                    amendment: None,
                },
                Source::FailClosed,
            )
        };
        match got {
            Ok(v) => match parse_answer(&v) {
                Ok(a) => (a, Source::Host),
                Err(e) => closed(format!("the host's approval answer was malformed: {e}")),
            },
            Err(HostError::Timeout { ms, .. }) => closed(format!(
                "the host did not answer approval.request within timeoutMs={ms}"
            )),
            Err(e) => closed(e.to_string()),
        }
    }

    /// Keeps `*_for_session` in memory and `*_always` in the store.
    async fn remember(&self, session: &str, tool: &str, category: &str, d: Decision) {
        match d {
            Decision::AllowForSession | Decision::DenyForSession => {
                self.agent.approvals.put(session, tool, category, d)
            }
            Decision::AllowAlways | Decision::DenyAlways => {
                let (t, c, ds) = (tool.to_string(), category.to_string(), d.as_str());
                if let Err(e) =
                    persist::call(&self.agent.store, move |s| s.put_approval_rule(&t, &c, ds)).await
                {
                    tracing::warn!("cannot store the approval rule for {tool} ({category}): {e}");
                }
            }
            _ => {}
        }
    }

    fn validate_amendment(&self, name: &str, args: &Map<String, Value>) -> Result<(), String> {
        match &self.host_tools {
            Some(h) if !LOCAL_TOOLS.contains(&name) => match h.get(name) {
                Some(t) => t.validate(args).map_err(String::from),
                None => Err(format!("unknown tool '{name}'")),
            },
            _ => match self.router.get(name) {
                Some(e) => e.validate(args).map_err(String::from),
                None => Err(format!("unknown tool '{name}'")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn programs_of_command_lines() {
        let cases: &[(&str, &[&str])] = &[
            ("git status", &["git"]),
            ("git add . && git commit -m 'x; rm -rf /'", &["git"]),
            ("cd sub && rm -rf build", &["cd", "rm"]),
            ("FOO=1 BAR=2 npm test", &["npm"]),
            ("/usr/bin/git log | head -5", &["git", "head"]),
            ("echo \"a; rm b\"", &["echo"]),
            ("echo $(rm x)", &["echo", "rm"]),
            ("echo \"$(whoami)\"", &["whoami", "echo"]),
            ("ls `rm y`", &["ls", "rm"]),
            ("if git diff --quiet; then rm x; fi", &["git", "rm"]),
            ("for f in *.txt; do rm $f; done", &["rm"]),
            ("cat <in.txt >out.txt; wc -l out.txt", &["cat", "wc"]),
            ("echo hi # && rm z", &["echo"]),
            ("sleep 1 &\nkill %1", &["sleep", "kill"]),
            ("(cd a; make)", &["cd", "make"]),
            ("", &[]),
        ];
        // A deep nest of quoted substitutions neither overflows the stack nor hides a program.
        let deep = format!(
            "{}rm x{}",
            "echo \"$(".repeat(100_000),
            ")\"".repeat(100_000)
        );
        assert!(bash_programs(&deep).contains(&NESTED.to_string()));
        for (cmd, want) in cases {
            assert_eq!(bash_programs(cmd), want.to_vec(), "{cmd}");
        }
    }

    #[test]
    fn category_by_mode_or_program() {
        let args = json!({"command": "git push"});
        let Value::Object(a) = args else { panic!() };
        assert_eq!(category("bash", ToolMode::Local, &a), "git");
        assert_eq!(
            category("delete_event", ToolMode::Destructive, &a),
            "destructive"
        );
        assert_eq!(category("bash", ToolMode::Local, &Map::new()), "local");
    }

    #[test]
    fn answers_fail_closed_on_anything_odd() {
        let a =
            parse_answer(&json!({"kind": "allow_once", "amendment": {"command": "ls"}})).unwrap();
        assert_eq!(a.decision, Decision::AllowOnce);
        assert!(a.amendment.is_some());
        assert!(parse_answer(&json!({"kind": "maybe"})).is_err());
        assert!(parse_answer(&json!("allow_once")).is_err());
        assert!(parse_answer(&json!({"kind": "deny_once", "amendment": {}})).is_err());
        assert!(parse_answer(&json!({"kind": "allow_once", "reason": 3})).is_err());
        for d in Decision::ALL {
            assert_eq!(Decision::parse(d.as_str()), Some(d));
        }
    }

    #[test]
    fn session_rules() {
        let r = SessionRules::default();
        r.put("s1", "bash", "git", Decision::AllowForSession);
        assert_eq!(r.get("s1", "bash", "git"), Some(Decision::AllowForSession));
        assert_eq!(r.get("s1", "bash", "rm"), None);
        assert_eq!(r.get("s2", "bash", "git"), None);
    }
}
