//! `bash_session`, `write_stdin` and `bash_session_kill` over the pipes: long-running and
//! interactive commands on a pseudo-terminal in the sandbox, driven with `tool.invoke`
//! (`context.sessionId` is the chat) and from chat turns of the scripted provider. Real
//! processes, found on the host by unique `sleep` arguments.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{Opts, Sidecar, WAIT, pids_with_arg, sigkill, wait_until};
use crate::support::chat_helpers::{finish, merge, run, scripted, start, until};
use serde_json::{Value, json};

/// How long a process may take to disappear after it was told to.
const GONE: Duration = Duration::from_secs(5);

/// A per-test unique `sleep` argument: `4321.<our pid><tag>`.
fn marker(tag: u32) -> String {
    format!("4321.{:06}{tag:02}", std::process::id() % 1_000_000)
}

fn running(m: &str) -> bool {
    !pids_with_arg(m).is_empty()
}

fn wait_running(m: &str) {
    assert!(wait_until(WAIT, || running(m)), "sleep {m} never started");
}

fn wait_gone(m: &str, what: &str) {
    assert!(
        wait_until(GONE, || !running(m)),
        "sleep {m} survived {what}: {:?}",
        pids_with_arg(m)
    );
}

/// A sidecar and a workspace; every call names its chat (`context.sessionId`).
struct T {
    s: Sidecar,
    ws: tempfile::TempDir,
}

impl T {
    fn new() -> T {
        T::with_env(&[])
    }

    fn with_env(env: &[(&str, &str)]) -> T {
        T {
            s: Sidecar::start_with(Opts {
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Opts::default()
            }),
            ws: tempfile::tempdir().unwrap(),
        }
    }

    fn ws(&self) -> &Path {
        self.ws.path()
    }

    /// The tool's result for `name` with `args` in chat `chat` ("" = no `context.sessionId`).
    fn call(&mut self, chat: &str, name: &str, args: Value) -> Value {
        let mut context = json!({"cwd": self.ws.path()});
        if !chat.is_empty() {
            context["sessionId"] = json!(chat);
        }
        self.s.ok(
            "tool.invoke",
            json!({"name": name, "arguments": args, "consentGranted": true, "context": context}),
        )
    }

    /// Starts `command` (yieldMs 0 unless `extra` says otherwise) and returns the result,
    /// which must be a success.
    fn start(&mut self, chat: &str, command: &str, extra: Value) -> Value {
        let args = merge(json!({"command": command, "yieldMs": 0}), extra);
        let r = self.call(chat, "bash_session", args);
        assert_eq!(r["success"], true, "start {command:?}: {r}");
        assert_eq!(r["data"]["command"], command, "{r}");
        r
    }

    fn start_id(&mut self, chat: &str, command: &str) -> String {
        id_of(&self.start(chat, command, json!({})))
    }

    fn poll(&mut self, chat: &str, id: &str, yield_ms: u64) -> Value {
        self.call(
            chat,
            "bash_session",
            json!({"sessionId": id, "yieldMs": yield_ms}),
        )
    }

    fn write(&mut self, chat: &str, id: &str, chars: &str, yield_ms: u64) -> Value {
        self.call(
            chat,
            "write_stdin",
            json!({"sessionId": id, "chars": chars, "yieldMs": yield_ms}),
        )
    }

    fn kill(&mut self, chat: &str, id: &str) -> Value {
        self.call(chat, "bash_session_kill", json!({"sessionId": id}))
    }

    /// The chat's listing (`bash_session {}`).
    fn list(&mut self, chat: &str) -> Vec<Value> {
        let r = self.call(chat, "bash_session", json!({}));
        assert_eq!(r["success"], true, "{r}");
        r["data"]["sessions"].as_array().expect("sessions").clone()
    }

    fn listed_ids(&mut self, chat: &str) -> Vec<String> {
        self.list(chat)
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap().to_string())
            .collect()
    }

    /// Polls `id` until `first`'s output and what follows contain `needle`; returns that
    /// output and the last result. The session must still be running when it shows.
    fn read_until(&mut self, chat: &str, first: &Value, needle: &str) -> (String, Value) {
        assert_eq!(first["success"], true, "{first}");
        let id = id_of(first);
        let mut out = output(first).to_string();
        if out.contains(needle) {
            return (out, first.clone());
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let r = self.poll(chat, &id, 200);
            assert_eq!(r["success"], true, "waiting for {needle:?} in {out:?}: {r}");
            out.push_str(r["data"]["output"].as_str().unwrap());
            if out.contains(needle) {
                return (out, r);
            }
            assert_eq!(
                r["data"]["running"], true,
                "ended before {needle:?}: {out:?}"
            );
            assert!(Instant::now() < deadline, "no {needle:?} in {out:?}");
        }
    }
}

fn id_of(r: &Value) -> String {
    r["data"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionId: {r}"))
        .to_string()
}

fn output(r: &Value) -> &str {
    r["data"]["output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output: {r}"))
}

fn error(r: &Value) -> &str {
    r["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {r}"))
}

fn assert_unknown(r: &Value, id: &str) {
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["data"]["kind"], "unknown_session", "{r}");
    assert!(error(r).contains(&format!("'{id}'")), "{r}");
}

/// A running session's result: output so far, no exit code.
fn assert_running(r: &Value) {
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["running"], true, "{r}");
    assert!(r["data"]["exitCode"].is_null(), "{r}");
}

/// Field `n` (1-based, as in proc(5)) of `/proc/<pid>/stat`.
fn stat_field(pid: i32, n: usize) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces; the fields after it do not.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split(' ').nth(n - 3).unwrap().parse().unwrap()
}

/// The numbers of the complete `tick-N` lines of `text`.
fn ticks(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("tick-")?.parse().ok())
        .collect()
}

#[test]
fn a_dev_server_keeps_running_and_each_poll_returns_only_new_lines() {
    let mut t = T::new();
    let cmd = "i=0; while :; do i=$((i+1)); echo tick-$i; sleep 0.3; done";
    let first = t.start("c", cmd, json!({"yieldMs": 700}));
    assert_running(&first);
    let id = id_of(&first);
    let mut all = output(&first).to_string();
    let mut last = ticks(&all).last().copied().unwrap_or(0);
    for poll in 1..=3 {
        let r = t.poll("c", &id, 700);
        assert_running(&r);
        assert_eq!(r["data"]["sessionId"], id.as_str(), "{r}");
        assert!(
            r["data"].get("command").is_none(),
            "only a start echoes the command: {r}"
        );
        let got = ticks(output(&r));
        assert!(!got.is_empty(), "poll {poll} brought no new line: {r}");
        assert!(
            got[0] > last && got.windows(2).all(|w| w[1] == w[0] + 1),
            "poll {poll}: {got:?} after {last}"
        );
        last = *got.last().unwrap();
        all.push_str(output(&r));
    }
    // Together the polls saw every line once, in order, from the first.
    let seen = ticks(&all);
    assert_eq!(seen, (1..=last).collect::<Vec<_>>(), "{all:?}");
    assert!(last >= 4, "{all:?}");
    let k = t.kill("c", &id);
    assert_eq!(k["data"]["killed"], true, "{k}");
}

#[test]
fn write_stdin_answers_a_prompt_and_the_ended_session_is_forgotten() {
    let mut t = T::new();
    let first = t.start("c", "read -p 'Name? ' n; echo \"hello $n\"", json!({}));
    let id = id_of(&first);
    let (shown, _) = t.read_until("c", &first, "Name? ");
    assert_eq!(shown, "Name? ", "the prompt and nothing else");
    let t0 = Instant::now();
    let r = t.write("c", &id, "Bob\n", 20_000);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "an exit ends the wait early: {:?}",
        t0.elapsed()
    );
    assert_eq!(r["success"], true, "{r}");
    // The terminal echoes what was typed, then the command's answer.
    assert_eq!(output(&r), "Bob\nhello Bob\n", "{r}");
    assert_eq!(r["data"]["running"], false, "{r}");
    assert_eq!(r["data"]["exitCode"], 0, "{r}");
    // That result was the last: the id is gone for reads, writes and kills.
    assert_unknown(&t.poll("c", &id, 0), &id);
    let w = t.write("c", &id, "again\n", 0);
    assert_unknown(&w, &id);
    assert!(error(&w).contains("this chat has no bash sessions"), "{w}");
    assert_unknown(&t.kill("c", &id), &id);
    assert!(t.list("c").is_empty());
}

#[test]
fn ctrl_c_interrupts_the_command_and_nothing_after_it_runs() {
    let mut t = T::new();
    let m = marker(1);
    let id = t.start_id("c", &format!("sleep {m}; echo after"));
    wait_running(&m);
    let r = t.write("c", &id, "\u{3}", 10_000);
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["running"], false, "{r}");
    assert_eq!(r["data"]["exitCode"], 130, "128 + SIGINT: {r}");
    assert!(!output(&r).contains("after"), "{r}");
    wait_gone(&m, "Ctrl-C");
    assert_unknown(&t.poll("c", &id, 0), &id);
}

#[test]
fn an_interactive_shell_survives_ctrl_c_of_its_foreground_job() {
    let mut t = T::new();
    let m = marker(2);
    let id = t.start_id("c", "bash --norc --noprofile");
    let r = t.write("c", &id, "echo ready-$((1+1))\n", 200);
    assert_running(&r);
    t.read_until("c", &r, "ready-2");
    let r = t.write("c", &id, &format!("sleep {m}\n"), 0);
    assert_running(&r);
    wait_running(&m);
    let r = t.write("c", &id, "\u{3}", 200);
    assert_running(&r);
    wait_gone(&m, "Ctrl-C in the shell");
    let r = t.write("c", &id, "echo alive-$((6*7))\n", 200);
    assert_running(&r);
    let (_, last) = t.read_until("c", &r, "alive-42");
    assert_running(&last);
    // Ctrl-D at the prompt ends the shell with status 0.
    let r = t.write("c", &id, "\u{4}", 10_000);
    assert_eq!(r["data"]["running"], false, "{r}");
    assert_eq!(r["data"]["exitCode"], 0, "{r}");
}

#[test]
fn ctrl_d_ends_cat_after_it_echoed_a_line() {
    let mut t = T::new();
    let id = t.start_id("c", "cat; echo cat-done-$((2*3))");
    let r = t.write("c", &id, "abc\n", 0);
    assert_running(&r);
    // The terminal's echo of the typed line, then cat's copy of it.
    let (out, _) = t.read_until("c", &r, "abc\nabc\n");
    assert_eq!(out, "abc\nabc\n");
    let r = t.write("c", &id, "\u{4}", 10_000);
    assert_eq!(output(&r), "cat-done-6\n", "{r}");
    assert_eq!(r["data"]["exitCode"], 0, "{r}");
}

#[test]
fn long_output_keeps_the_newest_within_max_output_and_saves_all_of_it() {
    let mut t = T::new();
    let r = t.start(
        "c",
        "seq 1 20000",
        json!({"yieldMs": 20_000, "maxOutput": 1000}),
    );
    let full: String = (1..=20_000).map(|i| format!("{i}\n")).collect();
    assert!(full.len() > 100_000);
    let d = &r["data"];
    assert_eq!(d["running"], false, "{r}");
    assert_eq!(d["exitCode"], 0, "{r}");
    assert_eq!(d["truncated"], true, "{r}");
    assert!(d.get("droppedBytes").is_none(), "{r}");
    let out = output(&r);
    assert!(out.len() <= 1000, "{}", out.len());
    let (head, tail) = out.split_once("]\n").expect("a leading marker");
    let omitted: usize = head
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(" bytes omitted; all of it is in data.file_path"))
        .unwrap_or_else(|| panic!("marker {head:?}"))
        .parse()
        .unwrap();
    assert!(
        tail.ends_with("\n19999\n20000\n"),
        "the newest kept: {tail:?}"
    );
    assert!(full.ends_with(tail));
    assert_eq!(omitted + tail.len(), full.len(), "exact count");
    let path = d["file_path"].as_str().expect("file_path");
    assert!(
        Path::new(path).starts_with(t.ws().join(".outrigger/tmp/bash-output")),
        "{path}"
    );
    assert_eq!(std::fs::read_to_string(path).unwrap(), full);
    // Within the bound nothing is cut and nothing saved.
    let r = t.start("c", "seq 1 50", json!({"yieldMs": 20_000}));
    assert_eq!(r["data"]["truncated"], false, "{r}");
    assert!(r["data"].get("file_path").is_none(), "{r}");
    assert_eq!(
        output(&r),
        (1..=50).map(|i| format!("{i}\n")).collect::<String>()
    );
}

#[test]
fn a_full_buffer_drops_the_oldest_and_says_how_much() {
    let mut t = T::with_env(&[("OUTRIGGER_BASH_SESSION_BUFFER_BYTES", "16384")]);
    let m = marker(3);
    // raw_output: the bytes as the terminal gave them (CRLF), so they can be counted.
    let cmd = format!("seq 1 40000; echo END-MARK; sleep {m}");
    let raw = json!({"maxOutput": 32768, "raw_output": true});
    let r = t.start("c", &cmd, raw.clone());
    let id = id_of(&r);
    let mut results = vec![r];
    let deadline = Instant::now() + WAIT;
    while !results.iter().any(|r| output(r).contains("END-MARK")) {
        assert!(Instant::now() < deadline, "no END-MARK: {results:?}");
        let r = t.call(
            "c",
            "bash_session",
            merge(json!({"sessionId": id, "yieldMs": 300}), raw.clone()),
        );
        assert_running(&r);
        results.push(r);
    }
    let stream: String = (1..=40_000)
        .map(|i| format!("{i}\r\n"))
        .chain(["END-MARK\r\n".to_string()])
        .collect();
    let (mut dropped, mut kept) = (0u64, String::new());
    for r in &results {
        let out = output(r);
        assert!(out.len() <= 32768, "{}", out.len());
        assert_eq!(r["data"]["truncated"], false, "{r}");
        match r["data"]["droppedBytes"].as_u64() {
            Some(n) => {
                assert!(n > 0, "{r}");
                let note = format!(
                    "[{n} bytes dropped: more output came between calls than the session keeps (bash_session_buffer_bytes); the oldest went]\n"
                );
                let rest = out.strip_prefix(&note).unwrap_or_else(|| {
                    panic!("the drop marker leads: {:?}", &out[..out.len().min(200)])
                });
                assert!(rest.len() <= 16384, "the buffer's bound: {}", rest.len());
                dropped += n;
                kept.push_str(rest);
            }
            None => {
                assert!(!out.contains("bytes dropped"), "{r}");
                kept.push_str(out);
            }
        }
    }
    assert!(dropped > 0, "200 KB into a 16 KB buffer dropped nothing");
    assert_eq!(
        dropped as usize + kept.len(),
        stream.len(),
        "every byte either returned or counted as dropped"
    );
    assert!(
        kept.ends_with("39999\r\n40000\r\nEND-MARK\r\n"),
        "the newest kept"
    );
    assert!(stream.ends_with(&kept[kept.len() - 16_000..]));
    let k = t.kill("c", &id);
    assert_eq!(k["data"]["killed"], true, "{k}");
    wait_gone(&m, "bash_session_kill");
}

#[test]
fn the_session_cap_names_the_idlest_and_counts_per_chat() {
    let mut t = T::with_env(&[("OUTRIGGER_BASH_MAX_SESSIONS", "2")]);
    let (m1, m2, m3, m4, m5) = (marker(4), marker(5), marker(6), marker(7), marker(8));
    let a1 = t.start_id("a", &format!("sleep {m1}"));
    let a2 = t.start_id("a", &format!("sleep {m2}"));
    let full = |r: &Value, idlest: &str| {
        assert_eq!(r["success"], false, "{r}");
        assert_eq!(r["data"]["kind"], "session_cap", "{r}");
        assert_eq!(r["data"]["max"], 2, "{r}");
        assert_eq!(r["data"]["idlest"], idlest, "{r}");
        let e = error(r);
        assert!(
            e.contains(&format!("\"sessionId\": \"{idlest}\"")) && e.contains("bash_session_kill"),
            "{r}"
        );
    };
    // a1 was used longest ago.
    let r = t.call(
        "a",
        "bash_session",
        json!({"command": format!("sleep {m3}")}),
    );
    full(&r, &a1);
    // Reading a1 makes a2 the idlest.
    assert_running(&t.poll("a", &a1, 0));
    let r = t.call(
        "a",
        "bash_session",
        json!({"command": format!("sleep {m3}")}),
    );
    full(&r, &a2);
    assert!(!running(&m3), "a refused start ran anyway");
    assert_eq!(t.listed_ids("a"), [a1.clone(), a2.clone()]);
    // Another chat has its own count.
    let b1 = t.start_id("b", &format!("sleep {m4}"));
    wait_running(&m4);
    // Ending one makes room.
    let k = t.kill("a", &a1);
    assert_eq!(k["data"]["killed"], true, "{k}");
    let a3 = t.start_id("a", &format!("sleep {m3}"));
    wait_running(&m3);
    wait_gone(&m1, "bash_session_kill");
    assert_eq!(t.listed_ids("a"), [a2, a3]);
    // A finished session whose end nobody read does not count (and is forgotten for room).
    let b2 = t.start_id("b", "while [ ! -e go ]; do sleep 0.05; done; exit 4");
    std::fs::write(t.ws().join("go"), "").unwrap();
    assert!(
        wait_until(WAIT, || t
            .list("b")
            .iter()
            .any(|s| s["sessionId"] == b2.as_str()
                && s["running"] == false
                && s["exitCode"] == 4)),
        "{:?}",
        t.list("b")
    );
    let b3 = t.start_id("b", &format!("sleep {m5}"));
    wait_running(&m5);
    assert_eq!(t.listed_ids("b"), [b1, b3]);
}

#[test]
fn a_chat_lists_only_its_own_sessions() {
    let mut t = T::new();
    let m = marker(9);
    let cmd = format!("sleep {m}");
    let id = t.start_id("mine", &cmd);
    wait_running(&m);
    let list = t.list("mine");
    assert_eq!(list.len(), 1, "{list:?}");
    let s = &list[0];
    assert_eq!(s["sessionId"], id.as_str());
    assert_eq!(s["command"], cmd.as_str());
    assert_eq!(s["running"], true);
    assert!(s["exitCode"].is_null());
    assert!(s["ageMs"].is_u64() && s["idleMs"].is_u64(), "{s}");
    // pid: the session's process; the command runs in its terminal session.
    let pid = s["pid"].as_i64().expect("pid") as i32;
    let sleeper = pids_with_arg(&m)[0];
    assert_eq!(
        stat_field(sleeper, 6),
        i64::from(pid),
        "session of the sleeper"
    );
    // Other chats (and calls with no chat) see nothing of it.
    for other in ["theirs", ""] {
        assert!(t.list(other).is_empty(), "chat {other:?}");
        assert_unknown(&t.poll(other, &id, 0), &id);
        assert_unknown(&t.write(other, &id, "x", 0), &id);
        let k = t.kill(other, &id);
        assert_unknown(&k, &id);
        assert!(error(&k).contains("this chat has no bash sessions"), "{k}");
    }
    assert!(running(&m), "another chat's kill reached it");
    // The owner's error for a wrong id names its sessions.
    let r = t.poll("mine", "bs999", 0);
    assert_unknown(&r, "bs999");
    assert!(
        error(&r).contains(&format!("this chat's sessions: {id}")),
        "{r}"
    );
    assert_running(&t.poll("mine", &id, 0));
}

#[test]
fn kill_ends_the_command_and_forgets_the_session() {
    let mut t = T::new();
    let m = marker(10);
    let first = t.start("c", &format!("echo begun; sleep {m}"), json!({}));
    let id = id_of(&first);
    wait_running(&m);
    let k = t.kill("c", &id);
    assert_eq!(k["success"], true, "{k}");
    let d = &k["data"];
    assert_eq!(d["sessionId"], id.as_str(), "{k}");
    assert_eq!(d["killed"], true, "{k}");
    assert_eq!(d["running"], false, "{k}");
    // SIGHUP comes first; bash dies of it.
    assert_eq!(d["exitCode"], 128 + 1, "{k}");
    // What the start did not return comes back with the kill.
    let out = format!("{}{}", output(&first), output(&k));
    assert_eq!(out, "begun\n", "{first} {k}");
    assert_eq!(d["_sandbox"]["backend"], "landlock", "{k}");
    wait_gone(&m, "bash_session_kill");
    assert_unknown(&t.kill("c", &id), &id);
    assert!(t.list("c").is_empty());
}

#[test]
fn kill_ends_an_interactive_shell_idle_or_running_a_job() {
    let mut t = T::new();
    // At its prompt the shell is the terminal's foreground group: the hangup ends it.
    let id = t.start_id("c", "bash --norc --noprofile");
    let r = t.write("c", &id, "echo up-$((1+2))\n", 200);
    t.read_until("c", &r, "up-3");
    let k = t.kill("c", &id);
    assert_eq!(k["data"]["killed"], true, "{k}");
    // 129 (SIGHUP), not 137: no wait for the SIGKILL grace.
    assert_eq!(k["data"]["exitCode"], 129, "{k}");
    // With a job in the foreground, the shell and its job end all the same.
    let m = marker(26);
    let id = t.start_id("c", "bash --norc --noprofile");
    let r = t.write("c", &id, &format!("sleep {m}\n"), 0);
    assert_running(&r);
    wait_running(&m);
    let k = t.kill("c", &id);
    assert_eq!(k["data"]["killed"], true, "{k}");
    assert_eq!(k["data"]["running"], false, "{k}");
    let code = k["data"]["exitCode"].as_i64().unwrap();
    assert!([129, 137].contains(&code), "{k}");
    wait_gone(&m, "bash_session_kill of the shell");
    assert!(t.list("c").is_empty());
}

/// `bash_session_kill` of an interactive shell with a foreground job hangs up every group of
/// the terminal's session, the shell's included (it is not in the foreground group while the
/// job runs): exit 129 at once, not SIGKILL 2 s later.
#[test]
fn kill_hangs_up_an_interactive_shell_with_a_foreground_job_at_once() {
    let mut t = T::new();
    let m = marker(27);
    let id = t.start_id("c", "bash --norc --noprofile");
    let r = t.write("c", &id, &format!("sleep {m}\n"), 0);
    assert_running(&r);
    wait_running(&m);
    let t0 = Instant::now();
    let k = t.kill("c", &id);
    assert_eq!(k["data"]["exitCode"], 129, "{k}");
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
}

#[test]
fn kill_escalates_to_sigkill_for_a_command_ignoring_hup_and_term() {
    let mut t = T::new();
    let m = marker(11);
    // Ignored signals stay ignored across exec: sleep ignores them too.
    let id = t.start_id("c", &format!("trap '' HUP TERM; sleep {m}"));
    wait_running(&m);
    let t0 = Instant::now();
    let k = t.kill("c", &id);
    let took = t0.elapsed();
    assert_eq!(k["data"]["killed"], true, "{k}");
    assert_eq!(k["data"]["exitCode"], 128 + 9, "{k}");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(10),
        "SIGKILL after the grace: {took:?}"
    );
    wait_gone(&m, "SIGKILL");
}

/// Three sessions whose processes try to linger: a plain sleep, a `setsid` one (its own
/// session, no terminal), and a job of an interactive shell (its own process group).
fn lingerers(t: &mut T, tags: [u32; 4]) -> Vec<String> {
    let m: Vec<String> = tags.iter().map(|&i| marker(i)).collect();
    t.start_id("c", &format!("sleep {}", m[0]));
    t.start_id("c", &format!("setsid sleep {} & sleep {}", m[1], m[2]));
    let sh = t.start_id("c", "bash --norc --noprofile");
    let r = t.write("c", &sh, &format!("sleep {}\n", m[3]), 0);
    assert_running(&r);
    for x in &m {
        wait_running(x);
    }
    m
}

#[test]
fn closing_stdin_ends_every_session() {
    let mut t = T::new();
    let m = lingerers(&mut t, [12, 13, 14, 15]);
    t.s.close_stdin();
    assert_eq!(t.s.wait_exit(WAIT).code(), Some(0));
    for x in &m {
        wait_gone(x, "the sidecar's exit");
    }
}

#[test]
fn sigkill_of_the_sidecar_ends_every_session() {
    let mut t = T::new();
    let m = lingerers(&mut t, [16, 17, 18, 19]);
    sigkill(&mut t.s);
    for x in &m {
        wait_gone(x, "SIGKILL of the sidecar");
    }
}

#[test]
fn cancelling_a_turn_ends_its_chats_sessions_only() {
    let mut t = T::new();
    let (m, other) = (marker(20), marker(21));
    // Another chat's session, which the cancel must leave alone.
    let keep = t.start_id("other-chat", &format!("sleep {other}"));
    let script = json!([
        {"toolCalls": [{"id": "bs", "name": "bash_session",
                        "arguments": {"command": format!("sleep {m}"), "yieldMs": 0}}]},
        {"delayMs": 60000, "text": "late"}
    ]);
    let p = merge(
        scripted(script, "start it"),
        json!({"cwd": t.ws(), "chatId": "rec_bs_cancel", "sessionId": "turn-chat"}),
    );
    let sid = start(&mut t.s, p);
    let mut frames = until(&mut t.s, &sid, |f| f["params"]["toolResult"]["id"] == "bs");
    let res = &frames.last().unwrap()["params"]["toolResult"];
    assert_eq!(res["success"], true, "{res}");
    assert_eq!(res["sandbox"]["backend"], "landlock", "{res}");
    wait_running(&m);
    // The session belongs to the turn's chat and outlived its call.
    let listed = t.list("turn-chat");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["command"], format!("sleep {m}"));
    t.s.ok("agent.chat.cancel", json!({"streamId": sid}));
    frames.extend(until(&mut t.s, &sid, |f| f["method"] == "stream.done"));
    let r = finish(&mut t.s, &sid, frames);
    assert_eq!(r.done["status"], "cancelled", "{:?}", r.frames);
    wait_gone(&m, "the turn's cancel");
    assert!(t.list("turn-chat").is_empty());
    assert!(
        running(&other),
        "another chat's session died with the cancel"
    );
    assert_running(&t.poll("other-chat", &keep, 0));
}

#[test]
fn a_session_outlives_the_turn_that_started_it() {
    let mut t = T::new();
    let m = marker(22);
    let script = json!([
        {"toolCalls": [{"id": "bs", "name": "bash_session",
                        "arguments": {"command": format!("read x; echo got-$x; sleep {m}"), "yieldMs": 0}}]},
        {"text": "started"}
    ]);
    let p = merge(
        scripted(script, "start it"),
        json!({"cwd": t.ws(), "chatId": "rec_bs_done", "sessionId": "turn-chat-2"}),
    );
    let r = run(&mut t.s, p);
    assert_eq!(r.done["status"], "completed", "{:?}", r.frames);
    let res = r.with("toolResult");
    assert_eq!(res.len(), 1, "{:?}", r.frames);
    assert_eq!(res[0]["success"], true, "{}", res[0]);
    // Still there after the turn ended, and reachable from the turn's chat.
    let list = t.list("turn-chat-2");
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["running"], true, "{list:?}");
    let id = list[0]["sessionId"].as_str().unwrap().to_string();
    let r = t.write("turn-chat-2", &id, "it\n", 200);
    let (out, _) = t.read_until("turn-chat-2", &r, "got-it\n");
    assert!(out.ends_with("it\ngot-it\n"), "{out:?}");
    wait_running(&m);
    let k = t.kill("turn-chat-2", &id);
    assert_eq!(k["data"]["killed"], true, "{k}");
    wait_gone(&m, "bash_session_kill");
}

#[test]
fn the_sandbox_applies_and_is_reported() {
    let mut t = T::new();
    let outside = format!("/tmp/outrigger-bs-escape-{}", std::process::id());
    let _ = std::fs::remove_file(&outside);
    let cmd = format!("touch {outside}; echo out=$?; touch inside.txt; echo in=$?");
    let r = t.start("c", &cmd, json!({"yieldMs": 20_000}));
    assert_eq!(r["data"]["exitCode"], 0, "{r}");
    assert_eq!(
        r["data"]["_sandbox"],
        json!({"backend": "landlock", "enforcement": "full"}),
        "{r}"
    );
    let out = output(&r);
    assert!(out.contains("out=1\n") && out.ends_with("in=0\n"), "{r}");
    assert!(!Path::new(&outside).exists(), "wrote outside the workspace");
    assert!(t.ws().join("inside.txt").exists());
    // Network off by default.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let r = t.start(
        "c",
        &format!("(echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null; echo net=$?"),
        json!({"yieldMs": 20_000}),
    );
    assert_eq!(output(&r), "net=1\n", "{r}");
    // hostSpawn (the host runs commands) keeps no terminals: refused.
    let r = t.s.ok(
        "tool.invoke",
        json!({"name": "bash_session", "arguments": {"command": "touch hs.txt"},
               "consentGranted": true,
               "context": {"cwd": t.ws(), "execSandbox": {"hostSpawn": true}}}),
    );
    assert_eq!(r["success"], false, "{r}");
    assert!(error(&r).contains("hostSpawn"), "{r}");
    assert!(!t.ws().join("hs.txt").exists());
}

#[test]
fn the_terminal_is_a_tty_in_the_workspace_with_quiet_settings() {
    let mut t = T::new();
    let cmd = "pwd; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo tty; stty size; \
               echo TERM=$TERM NO_COLOR=$NO_COLOR PAGER=$PAGER GIT_PAGER=$GIT_PAGER; \
               printf '\\033[31mred\\033[0m\\n'";
    let r = t.start("c", cmd, json!({"yieldMs": 20_000}));
    let cwd = t.ws().canonicalize().unwrap();
    assert_eq!(
        output(&r),
        format!(
            "{}\ntty\n40 200\nTERM=dumb NO_COLOR=1 PAGER=cat GIT_PAGER=cat\nred\n",
            cwd.display()
        ),
        "{r}"
    );
    let r = t.start(
        "c",
        "printf '\\033[31mred\\033[0m\\n'",
        json!({"yieldMs": 20_000, "raw_output": true}),
    );
    assert_eq!(output(&r), "\x1b[31mred\x1b[0m\r\n", "{r}");
}

#[test]
fn bad_calls_are_refused_precisely() {
    let mut t = T::new();
    // command and sessionId together.
    let r = t.call(
        "c",
        "bash_session",
        json!({"command": "touch both.txt", "sessionId": "bs1"}),
    );
    assert_eq!(r["success"], false, "{r}");
    assert!(error(&r).contains("not both"), "{r}");
    // An empty command.
    let r = t.call("c", "bash_session", json!({"command": "  "}));
    assert_eq!(r["success"], false, "{r}");
    assert!(error(&r).starts_with("command is empty"), "{r}");
    assert!(t.list("c").is_empty());
    assert!(!t.ws().join("both.txt").exists());
    // Unknown ids, for all three tools.
    assert_unknown(&t.poll("c", "bs42", 0), "bs42");
    assert_unknown(&t.write("c", "bs42", "x", 0), "bs42");
    assert_unknown(&t.kill("c", "bs42"), "bs42");
    // Without consent nothing starts.
    let r = t.s.call(
        "tool.invoke",
        json!({"name": "bash_session", "arguments": {"command": "touch x"},
               "context": {"cwd": t.ws()}}),
    );
    assert_eq!(r["error"]["code"], -32002, "{r}");
    assert!(!t.ws().join("x").exists());
}

#[test]
fn writing_to_an_exited_session_fails_with_its_last_output_then_forgets_it() {
    let mut t = T::new();
    // It prints and exits once the test creates `go`: the start cannot return its end.
    let id = t.start_id(
        "c",
        "while [ ! -e go ]; do sleep 0.05; done; echo last-words; exit 3",
    );
    std::fs::write(t.ws().join("go"), "").unwrap();
    assert!(
        wait_until(WAIT, || t.list("c").iter().any(|s| s["running"] == false)),
        "never exited"
    );
    let listed = t.list("c");
    assert_eq!(listed[0]["exitCode"], 3, "{listed:?}");
    let r = t.write("c", &id, "too late\n", 0);
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(
        error(&r),
        format!("write_stdin to {id}: the command has exited (exit 3)"),
        "{r}"
    );
    assert_eq!(r["data"]["running"], false, "{r}");
    assert_eq!(r["data"]["exitCode"], 3, "{r}");
    assert_eq!(output(&r), "last-words\n", "{r}");
    // That result returned the end: the session is forgotten.
    assert_unknown(&t.poll("c", &id, 0), &id);
}

#[test]
fn oversized_input_is_refused_and_the_session_keeps_running() {
    let mut t = T::new();
    let m = marker(23);
    let id = t.start_id("c", &format!("sleep {m}"));
    // 40,000 characters pass the schema's maxLength but are 80,000 bytes.
    let r = t.write("c", &id, &"é".repeat(40_000), 0);
    assert_eq!(r["success"], false, "{r}");
    assert!(
        error(&r).starts_with("chars is 80000 bytes; at most 65536"),
        "{}",
        &error(&r)[..error(&r).len().min(300)]
    );
    let r = t.write("c", &id, &"x".repeat(65_537), 0);
    assert_eq!(r["success"], false, "{}", &r.to_string()[..300]);
    assert!(error(&r).contains("65536"));
    // The schema's message quotes the value: bounded, not 64 KiB of `x` back.
    assert!(error(&r).len() < 1_000, "{} bytes", error(&r).len());
    // The start returned at once (yieldMs 0): the command may still be on its way to exec.
    wait_running(&m);
    assert_running(&t.poll("c", &id, 0));
}

#[test]
fn a_kill_ends_a_waiting_poll_and_removes_the_private_tmpdir() {
    let mut t = T::new();
    let m = marker(24);
    let first = t.start(
        "c",
        &format!("echo tmp=$TMPDIR; touch $TMPDIR/scratch; sleep {m}"),
        json!({}),
    );
    let id = id_of(&first);
    let (out, _) = t.read_until("c", &first, "\n");
    let tmp = out
        .strip_prefix("tmp=")
        .and_then(|o| o.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("{out:?}"))
        .to_string();
    assert!(Path::new(&tmp).join("scratch").exists(), "{tmp}");
    wait_running(&m);
    // A poll that would wait 30 s...
    t.s.send(&json!({"jsonrpc": "2.0", "id": "waiting", "method": "tool.invoke", "params": {
        "name": "bash_session", "consentGranted": true, "context": {"cwd": t.ws(), "sessionId": "c"},
        "arguments": {"sessionId": id, "yieldMs": 30_000}}}));
    std::thread::sleep(Duration::from_millis(200));
    // ...ends with the kill, and both say how it ended.
    let t0 = Instant::now();
    let k = t.kill("c", &id);
    assert_eq!(k["data"]["exitCode"], 129, "{k}");
    let resp = t.s.response(&json!("waiting"));
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let r = &resp["result"];
    assert_eq!(r["success"], true, "{resp}");
    assert_eq!(r["data"]["running"], false, "{resp}");
    assert_eq!(r["data"]["exitCode"], 129, "{resp}");
    wait_gone(&m, "bash_session_kill");
    assert!(
        wait_until(GONE, || !Path::new(&tmp).exists()),
        "the session's TMPDIR {tmp} outlived it"
    );
}

#[test]
fn split_characters_and_escapes_are_held_back_until_complete() {
    let mut t = T::new();
    // "é" is \303\251; the escape \033[31m is cut after "\033[3".
    let cmd = "printf 'caf\\303'; sleep 0.6; printf '\\251 \\033[3'; sleep 0.6; printf '1mred\\033[0m!\\n'";
    let first = t.start("c", cmd, json!({"yieldMs": 300}));
    let mut parts = vec![output(&first).to_string()];
    let id = id_of(&first);
    while !parts.concat().contains('!') {
        let r = t.poll("c", &id, 300);
        assert_eq!(r["success"], true, "{r}");
        parts.push(output(&r).to_string());
    }
    let all = parts.concat();
    assert_eq!(all, "café red!\n", "{parts:?}");
    assert!(parts.len() >= 3, "the pauses fell between polls: {parts:?}");
    assert!(
        parts
            .iter()
            .all(|p| !p.contains('\u{fffd}') && !p.contains('\x1b')),
        "{parts:?}"
    );
}

#[test]
fn typed_secrets_are_not_echoed_when_the_command_turns_echo_off() {
    let mut t = T::new();
    let first = t.start(
        "c",
        "read -s -p 'Password: ' p; echo; echo length=${#p}",
        json!({}),
    );
    let id = id_of(&first);
    t.read_until("c", &first, "Password: ");
    let r = t.write("c", &id, "hunter2\n", 10_000);
    assert_eq!(r["data"]["exitCode"], 0, "{r}");
    assert_eq!(output(&r), "\nlength=7\n", "{r}");
}

#[test]
fn cancelling_a_turn_while_bash_session_waits_ends_it_at_once() {
    let mut t = T::new();
    let m = marker(25);
    let script = json!([
        {"toolCalls": [{"id": "bs", "name": "bash_session",
                        "arguments": {"command": format!("sleep {m}"), "yieldMs": 30000}}]},
        {"text": "never"}
    ]);
    let p = merge(
        scripted(script, "start it"),
        json!({"cwd": t.ws(), "chatId": "rec_bs_cancel_wait"}),
    );
    let sid = start(&mut t.s, p);
    let frames = until(&mut t.s, &sid, |f| f["params"]["toolCall"]["id"] == "bs");
    wait_running(&m);
    let t0 = Instant::now();
    t.s.ok("agent.chat.cancel", json!({"streamId": sid}));
    let r = finish(&mut t.s, &sid, frames);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(r.done["status"], "cancelled", "{:?}", r.frames);
    assert_eq!(r.with("toolResult").len(), 1, "{:?}", r.frames);
    wait_gone(&m, "the turn's cancel");
    // The chat's key was the record id (no sessionId given): nothing is left in it.
    assert!(t.list("rec_bs_cancel_wait").is_empty());
}

/// Typing is not held back by a long poll of the same session: the poll is a read, and
/// reads never wait for each other or for typing.
#[test]
fn write_stdin_is_not_held_back_by_a_long_poll() {
    let mut t = T::new();
    let first = t.start("c", "cat", json!({}));
    let id = id_of(&first);
    t.s.send(&json!({"jsonrpc": "2.0", "id": "long", "method": "tool.invoke", "params": {
        "name": "bash_session", "consentGranted": true, "context": {"cwd": t.ws(), "sessionId": "c"},
        "arguments": {"sessionId": id, "yieldMs": 5_000}}}));
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let w = t.write("c", &id, "typed-early\n", 0);
    assert_eq!(w["success"], true, "{w}");
    assert!(
        t0.elapsed() < Duration::from_millis(2_000),
        "write_stdin waited {:?} behind the poll",
        t0.elapsed()
    );
    // Every byte reaches exactly one of the two calls: the echo and cat's copy.
    let long = t.s.response(&json!("long"));
    let both = format!(
        "{}{}",
        output(&w),
        long["result"]["data"]["output"].as_str().unwrap_or("")
    );
    assert_eq!(both.matches("typed-early").count(), 2, "{both:?}");
    t.kill("c", &id);
}

/// Killing a session whose command already exited reports `killed: false` and its own exit.
#[test]
fn killing_an_exited_session_reports_its_own_exit() {
    let mut t = T::new();
    // Not `exit 4` alone: under load it could end before the start call (yieldMs 0) answers,
    // which then returns its last output and forgets it.
    let id = t.start_id("c", "sleep 0.5; exit 4");
    let deadline = Instant::now() + WAIT;
    while t.list("c").iter().any(|s| s["running"] == true) {
        assert!(Instant::now() < deadline, "exit 4 never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let k = t.kill("c", &id);
    assert_eq!(k["success"], true, "{k}");
    assert_eq!(k["data"]["killed"], false, "{k}");
    assert_eq!(k["data"]["exitCode"], 4, "{k}");
}
