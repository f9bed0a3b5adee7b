//! The scripted provider (`provider: "scripted"`): replays a model script, one turn per
//! model request, with no network. Hosts test their UI against it; the format is documented
//! in docs/scripted-provider.md.

use crate::strict::Invalid;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::types::{LlmError, LlmEvent, LlmItem, LlmRequest, RawChunk, ToolCall, Usage};
use super::{LlmStream, Provider, STREAM_CHANNEL_CAPACITY};

/// The longest delay one script step may ask for (a typo must not hang a test for hours).
pub const MAX_STEP_DELAY_MS: u64 = 600_000;

/// Text given as one string (one delta) or a list of strings (one delta each).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Deltas {
    One(String),
    Many(Vec<String>),
}

impl Deltas {
    fn pieces(&self) -> Vec<String> {
        match self {
            Deltas::One(s) => vec![s.clone()],
            Deltas::Many(v) => v.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptToolCall {
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptError {
    /// `http`, `rate_limited`, `network`, `context_overflow`, `stream`.
    pub kind: String,
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
}

/// One step of a fine-grained turn (`events`): exactly one key.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Step {
    Text(String),
    Reasoning(String),
    ToolCall(ScriptToolCall),
    Usage(Usage),
    DelayMs(u64),
    Error(ScriptError),
}

/// One model request's worth of output.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Turn {
    #[serde(default)]
    pub delay_ms: Option<u64>,
    #[serde(default)]
    pub chunk_delay_ms: Option<u64>,
    #[serde(default)]
    pub reasoning: Option<Deltas>,
    #[serde(default)]
    pub text: Option<Deltas>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub error: Option<ScriptError>,
    #[serde(default)]
    pub events: Option<Vec<Step>>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl Turn {
    /// The steps in order: `events` as given, or the shorthand fields expanded.
    fn steps(&self) -> Vec<Step> {
        if let Some(e) = &self.events {
            return e.clone();
        }
        let mut v = Vec::new();
        if let Some(d) = self.delay_ms {
            v.push(Step::DelayMs(d));
        }
        let gap = self.chunk_delay_ms.filter(|d| *d > 0);
        let push_pieces = |v: &mut Vec<Step>, d: &Deltas, mk: fn(String) -> Step| {
            for (i, p) in d.pieces().into_iter().enumerate() {
                if i > 0
                    && let Some(g) = gap
                {
                    v.push(Step::DelayMs(g));
                }
                v.push(mk(p));
            }
        };
        if let Some(r) = &self.reasoning {
            push_pieces(&mut v, r, Step::Reasoning);
        }
        if let Some(t) = &self.text {
            push_pieces(&mut v, t, Step::Text);
        }
        v.extend(self.tool_calls.iter().cloned().map(Step::ToolCall));
        if let Some(u) = self.usage {
            v.push(Step::Usage(u));
        }
        if let Some(e) = &self.error {
            v.push(Step::Error(e.clone()));
        }
        v
    }

    fn validate(&self) -> Result<(), String> {
        let shorthand = self.reasoning.is_some()
            || self.text.is_some()
            || !self.tool_calls.is_empty()
            || self.usage.is_some()
            || self.error.is_some()
            || self.delay_ms.is_some();
        if self.events.is_some() && shorthand {
            return Err("a turn has either \"events\" or the shorthand fields (text, reasoning, toolCalls, usage, error, delayMs), not both".into());
        }
        for s in self.steps() {
            match s {
                Step::DelayMs(d) if d > MAX_STEP_DELAY_MS => {
                    return Err(format!(
                        "delay {d} ms is above the {MAX_STEP_DELAY_MS} ms ceiling"
                    ));
                }
                Step::Error(e) => {
                    to_error(&e)?;
                }
                _ => {}
            }
        }
        if self.chunk_delay_ms.is_some_and(|d| d > MAX_STEP_DELAY_MS) {
            return Err(format!(
                "chunkDelayMs is above the {MAX_STEP_DELAY_MS} ms ceiling"
            ));
        }
        Ok(())
    }
}

fn to_error(e: &ScriptError) -> Result<LlmError, String> {
    let message = e.message.clone().unwrap_or_else(|| "scripted error".into());
    let retry_after = e.retry_after_ms.map(Duration::from_millis);
    Ok(match e.kind.as_str() {
        "http" => LlmError::Http {
            status: e.status.unwrap_or(500),
            body: message,
            retry_after,
        },
        "rate_limited" => LlmError::RateLimited {
            retry_after,
            body: message,
        },
        "network" => LlmError::Network { message },
        "context_overflow" => LlmError::ContextOverflow { message },
        "stream" => LlmError::Stream {
            message,
            client_fault: false,
        },
        other => {
            return Err(format!(
                "unknown error kind '{other}'; use http, rate_limited, network, context_overflow or stream"
            ));
        }
    })
}

pub struct ScriptedProvider {
    turns: Arc<Vec<Turn>>,
    next: Arc<AtomicUsize>,
}

impl ScriptedProvider {
    pub fn new(turns: Vec<Turn>) -> ScriptedProvider {
        ScriptedProvider {
            turns: Arc::new(turns),
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The inline `script` param: a list of turns.
    pub fn from_value(v: &Value) -> Result<ScriptedProvider, Invalid> {
        let Value::Array(items) = v else {
            return Err("script must be a list of turns; see docs/scripted-provider.md".into());
        };
        let mut turns = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let t = Turn::deserialize(item)
                .map_err(|e| format!("script turn {i}: {e}; see docs/scripted-provider.md"))?;
            t.validate().map_err(|e| format!("script turn {i}: {e}"))?;
            turns.push(t);
        }
        Ok(ScriptedProvider::new(turns))
    }

    /// `scriptPath`: JSON Lines, one turn per line; blank lines and `#` lines are skipped.
    pub fn from_jsonl(path: &Path) -> Result<ScriptedProvider, Invalid> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read scriptPath {}: {e}", path.display()))?;
        let mut turns = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let at = || format!("{} line {}", path.display(), n + 1);
            let t: Turn = serde_json::from_str(l)
                .map_err(|e| format!("{}: {e}; see docs/scripted-provider.md", at()))?;
            t.validate().map_err(|e| format!("{}: {e}", at()))?;
            turns.push(t);
        }
        Ok(ScriptedProvider::new(turns))
    }

    pub fn len(&self) -> usize {
        self.turns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn stream(&self, req: LlmRequest, cancel: CancellationToken) -> LlmStream {
        let (tx, rx) = mpsc::channel(STREAM_CHANNEL_CAPACITY);
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let turns = self.turns.clone();
        tokio::spawn(async move {
            let r = match turns.get(n) {
                Some(t) => play(t, n, req.raw_chunks, &cancel, &tx).await,
                None => Err(LlmError::Stream {
                    message: format!(
                        "the scripted provider's script has {} turn(s) and model request {} asked for another; add turns to the script",
                        turns.len(),
                        n + 1
                    ),
                    client_fault: true,
                }),
            };
            if let Err(e) = r {
                let _ = tx.send(Err(e)).await;
            }
        });
        LlmStream::new(rx)
    }
}

async fn play(
    turn: &Turn,
    n: usize,
    raw: bool,
    cancel: &CancellationToken,
    tx: &mpsc::Sender<LlmItem>,
) -> Result<(), LlmError> {
    let send = |ev: LlmEvent| async move {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(LlmError::Cancelled),
            r = tx.send(Ok(ev)) => r.map_err(|_| LlmError::Cancelled),
        }
    };
    let mut calls = 0usize;
    for step in turn.steps() {
        if cancel.is_cancelled() {
            return Err(LlmError::Cancelled);
        }
        match step {
            Step::DelayMs(ms) => {
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                }
            }
            Step::Text(t) => {
                if raw {
                    send(LlmEvent::Raw(RawChunk {
                        content_delta: Some(t.clone()),
                        ..RawChunk::default()
                    }))
                    .await?;
                }
                send(LlmEvent::Content { text: t }).await?;
            }
            Step::Reasoning(t) => {
                if raw {
                    send(LlmEvent::Raw(RawChunk {
                        reasoning_delta: Some(t.clone()),
                        ..RawChunk::default()
                    }))
                    .await?;
                }
                send(LlmEvent::Reasoning { text: t }).await?;
            }
            Step::ToolCall(c) => {
                let arguments = match c.arguments {
                    Value::Null => Value::Object(Default::default()),
                    Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
                    v => v,
                };
                let call = ToolCall {
                    id: c.id.unwrap_or_else(|| format!("call_{n}_{calls}")),
                    name: c.name,
                    arguments,
                    arguments_error: None,
                    extra_content: None,
                };
                calls += 1;
                if raw {
                    send(LlmEvent::Raw(RawChunk {
                        tool_call_delta: Some(call.clone()),
                        ..RawChunk::default()
                    }))
                    .await?;
                }
                send(LlmEvent::ToolCall(call)).await?;
            }
            Step::Usage(mut u) => {
                if u.total == 0 {
                    u.total = u.prompt + u.completion;
                }
                send(LlmEvent::Usage(u)).await?;
            }
            Step::Error(e) => {
                return Err(to_error(&e).unwrap_or(LlmError::Stream {
                    message: "scripted error".into(),
                    client_fault: false,
                }));
            }
        }
    }
    let reason = turn
        .finish_reason
        .clone()
        .unwrap_or_else(|| (if calls > 0 { "tool_calls" } else { "stop" }).to_string());
    send(LlmEvent::Finish { reason }).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn collect(p: &ScriptedProvider) -> Vec<LlmItem> {
        let mut s = p.stream(LlmRequest::default(), CancellationToken::new());
        let mut v = Vec::new();
        while let Some(i) = s.next().await {
            v.push(i);
        }
        v
    }

    #[tokio::test]
    async fn shorthand_turn_order_and_exhaustion() {
        let p = ScriptedProvider::from_value(&json!([
            {"reasoning": "think", "text": ["Hel", "lo"], "toolCalls": [{"name": "f", "arguments": {"a": 1}}],
             "usage": {"promptTokens": 3, "completionTokens": 2}},
            {"text": "bye"}
        ]))
        .unwrap();
        let t1: Vec<LlmEvent> = collect(&p).await.into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(
            t1[0],
            LlmEvent::Reasoning {
                text: "think".into()
            }
        );
        assert_eq!(t1[2], LlmEvent::Content { text: "lo".into() });
        let LlmEvent::ToolCall(c) = &t1[3] else {
            panic!("{t1:?}")
        };
        assert_eq!(
            (c.id.as_str(), c.arguments.clone()),
            ("call_0_0", json!({"a": 1}))
        );
        assert_eq!(
            t1[4],
            LlmEvent::Usage(Usage {
                prompt: 3,
                completion: 2,
                total: 5,
                cached: 0,
                cache_write: 0,
            })
        );
        assert_eq!(
            t1[5],
            LlmEvent::Finish {
                reason: "tool_calls".into()
            }
        );
        let t2 = collect(&p).await;
        assert_eq!(
            t2.last().unwrap().as_ref().unwrap(),
            &LlmEvent::Finish {
                reason: "stop".into()
            }
        );
        let t3 = collect(&p).await;
        assert!(matches!(t3[0], Err(LlmError::Stream { .. })));
    }

    #[tokio::test]
    async fn error_step_ends_the_turn_after_partial_text() {
        let p = ScriptedProvider::from_value(&json!([
            {"events": [{"text": "par"}, {"error": {"kind": "http", "status": 503, "message": "down"}}, {"text": "never"}]}
        ]))
        .unwrap();
        let v = collect(&p).await;
        assert_eq!(v.len(), 2);
        assert!(matches!(v[1], Err(LlmError::Http { status: 503, .. })));
    }

    #[test]
    fn bad_scripts_name_the_turn() {
        let e = ScriptedProvider::from_value(&json!([{"text": "a"}, {"txt": "b"}]))
            .err()
            .unwrap();
        assert!(e.contains("turn 1") && e.contains("txt"), "{e}");
        let e = ScriptedProvider::from_value(&json!([{"text": "a", "events": []}]))
            .err()
            .unwrap();
        assert!(e.contains("not both"), "{e}");
        let e = ScriptedProvider::from_value(&json!([{"error": {"kind": "boom"}}]))
            .err()
            .unwrap();
        assert!(e.contains("boom"), "{e}");
        assert!(ScriptedProvider::from_value(&json!({})).is_err());
    }

    #[tokio::test]
    async fn cancel_interrupts_a_delay() {
        let p =
            ScriptedProvider::from_value(&json!([{"delayMs": 600000, "text": "late"}])).unwrap();
        let cancel = CancellationToken::new();
        let mut s = p.stream(LlmRequest::default(), cancel.clone());
        cancel.cancel();
        let r = tokio::time::timeout(Duration::from_secs(10), s.next())
            .await
            .unwrap();
        assert!(matches!(r, Some(Err(LlmError::Cancelled))));
    }
}
