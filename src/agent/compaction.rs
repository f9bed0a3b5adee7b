//! Context management (reference §2.8): pressure estimate, folding old tool results,
//! summarizing the middle of the transcript, and spilling oversized tool output to a file.
//! The functions here are pure over the transcript; the loop does the I/O and the record.

use std::path::{Path, PathBuf};

use crate::llm::{Message, Role};

use super::persist::estimate_tokens;

/// Compaction triggers when the estimated prompt reaches this share of the window.
pub const TRIGGER_RATIO: f64 = 0.8;
/// It re-arms only after the estimate drops this share of the window below the trigger.
pub const HYSTERESIS_RATIO: f64 = 0.1;
/// Windows at least this large use the "large" knobs below.
pub const LARGE_WINDOW: u64 = 200_000;
/// Most recent tool results kept whole (small / large window).
pub const KEEP_TOOL_RESULTS: (usize, usize) = (2, 16);
/// Characters an older tool result is folded to.
pub const FOLD_EXCERPT_CHARS: (usize, usize) = (160, 4000);
/// Most recent messages kept verbatim around a summary.
pub const KEEP_LAST_MESSAGES: (usize, usize) = (6, 16);
/// Tool output longer than this many characters is spilled to a file.
pub const SPILL_MAX_INLINE: (usize, usize) = (16_000, 100_000);
/// Characters of spilled output kept inline as a preview.
pub const SPILL_PREVIEW: (usize, usize) = (2_000, 8_000);
/// Characters of each message in the deterministic fallback summary.
pub const EXCERPT_PER_MESSAGE: usize = 200;
/// Overflow recoveries (compact and retry) allowed per round.
pub const MAX_OVERFLOW_RECOVERIES: u32 = 2;

pub fn pick<T: Copy>(window: u64, pair: (T, T)) -> T {
    if window >= LARGE_WINDOW {
        pair.1
    } else {
        pair.0
    }
}

pub const SUMMARY_PROMPT: &str = "You are compacting an agent's conversation to save context. \
Summarize the conversation excerpt below for the agent that will continue it: the user's goals, \
decisions made, files and facts discovered, tool results that matter, and what remains to do. \
Be concise and concrete; do not invent anything.";

pub const SUMMARY_PREFIX: &str = "[Summary of the earlier conversation]\n";

/// Estimated tokens of a message list.
pub fn estimate(messages: &[Message]) -> u64 {
    messages.iter().map(estimate_tokens).sum()
}

fn cut(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_string();
    }
    let s: String = text.chars().take(n).collect();
    format!("{s}…")
}

/// Step 1: every tool result but the newest `keep` becomes an excerpt. Returns how many
/// were folded.
pub fn fold_tool_results(messages: &mut [Message], keep: usize, excerpt: usize) -> usize {
    let tool_idx: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Tool)
        .map(|(i, _)| i)
        .collect();
    let fold = tool_idx.len().saturating_sub(keep);
    let mut n = 0;
    for &i in &tool_idx[..fold] {
        let m = &mut messages[i];
        if m.content.chars().count() > excerpt {
            m.content = format!("[folded tool result] {}", cut(&m.content, excerpt));
            n += 1;
        }
    }
    n
}

/// Where the summarizable middle is: `(head_end, tail_start)`; the head is the leading
/// system messages plus the first user message, the tail the last `keep` messages widened
/// so no tool result is separated from the assistant call it answers.
pub fn middle(messages: &[Message], keep: usize) -> Option<(usize, usize)> {
    let head_end = messages
        .iter()
        .position(|m| m.role == Role::User)
        .map_or(0, |i| i + 1);
    let mut tail = messages.len().saturating_sub(keep).max(head_end);
    while tail > head_end && messages[tail].role == Role::Tool {
        tail -= 1;
    }
    (tail > head_end).then_some((head_end, tail))
}

/// The middle as plain text for the summarizer.
pub fn render(messages: &[Message]) -> String {
    let mut s = String::new();
    for m in messages {
        s.push_str(m.role.as_str());
        if let Some(n) = &m.name {
            s.push_str(&format!(" ({n})"));
        }
        s.push_str(": ");
        s.push_str(&m.content);
        for c in &m.tool_calls {
            s.push_str(&format!("\n  -> {}({})", c.name, c.arguments));
        }
        s.push('\n');
    }
    s
}

/// The deterministic summary used when the provider cannot write one.
pub fn excerpt_summary(messages: &[Message]) -> String {
    let mut s = format!("{} earlier messages, excerpted:\n", messages.len());
    for m in messages {
        let mut line = cut(&m.content.replace('\n', " "), EXCERPT_PER_MESSAGE);
        if !m.tool_calls.is_empty() {
            let names: Vec<&str> = m.tool_calls.iter().map(|c| c.name.as_str()).collect();
            line.push_str(&format!(" [called {}]", names.join(", ")));
        }
        s.push_str(&format!("- {}: {line}\n", m.role.as_str()));
    }
    s
}

/// Replaces the middle with one summary message.
pub fn splice(
    messages: &[Message],
    head_end: usize,
    tail_start: usize,
    summary: &str,
) -> Vec<Message> {
    let mut out: Vec<Message> = messages[..head_end].to_vec();
    out.push(Message::new(
        Role::User,
        format!("{SUMMARY_PREFIX}{summary}"),
    ));
    out.extend_from_slice(&messages[tail_start..]);
    out
}

/// Writes `text` to `<dir>/<name>.txt` and returns the inline replacement: a preview plus
/// the pointer.
pub fn spill(
    text: &str,
    dir: &Path,
    name: &str,
    preview_chars: usize,
) -> Result<(String, PathBuf), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the spill directory {}: {e}", dir.display()))?;
    let safe = crate::tools::sanitize_name(name);
    let path = dir.join(format!("{safe}.txt"));
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let total = text.chars().count();
    let inline = format!(
        "{}\n[output of {total} characters spilled to {}; read it with read_file for the rest]",
        cut(text, preview_chars),
        path.display()
    );
    Ok((inline, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;
    use serde_json::json;

    fn m(role: Role, s: &str) -> Message {
        Message::new(role, s)
    }

    #[test]
    fn middle_keeps_tool_with_its_call() {
        let mut a = m(Role::Assistant, "");
        a.tool_calls.push(ToolCall {
            id: "c".into(),
            name: "f".into(),
            arguments: json!({}),
            arguments_error: None,
            extra_content: None,
        });
        let v = vec![
            m(Role::System, "s"),
            m(Role::User, "u1"),
            m(Role::Assistant, "a1"),
            m(Role::User, "u2"),
            a,
            m(Role::Tool, "t"),
            m(Role::Assistant, "a2"),
        ];
        // keep 2 → tail would start at the tool message; it widens to its assistant call.
        assert_eq!(middle(&v, 2), Some((2, 4)));
        assert_eq!(middle(&v, 10), None);
        let out = splice(&v, 2, 4, "sum");
        assert_eq!(out.len(), 6);
        assert!(out[2].content.starts_with(SUMMARY_PREFIX));
    }

    #[test]
    fn folding_keeps_the_newest() {
        let long = "x".repeat(500);
        let mut v = vec![
            m(Role::Tool, &long),
            m(Role::Tool, &long),
            m(Role::Tool, &long),
        ];
        assert_eq!(fold_tool_results(&mut v, 2, 160), 1);
        assert!(v[0].content.starts_with("[folded tool result]"));
        assert_eq!(v[2].content, long);
    }

    #[test]
    fn spill_writes_and_previews() {
        let d = tempfile::tempdir().unwrap();
        let text = "y".repeat(5000);
        let (inline, path) = spill(&text, d.path(), "call/1", 100).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert!(
            inline.contains("spilled to") && inline.len() < 400,
            "{inline}"
        );
    }
}
