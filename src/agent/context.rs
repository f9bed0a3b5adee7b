//! The loop's context management step: pressure check, summary by the turn's own provider
//! (excerpt fallback) and the recorded compaction (start, summary, boundary, re-seed).

use std::sync::Arc;

use serde_json::{Map, json};

use super::compaction::{self as cx, pick};
use super::persist;
use super::run::Turn;
use crate::llm::{LlmEvent, LlmRequest, Message, Role};
use crate::store::{Boundary, BoundaryAction, CompactionMarker};

impl Turn {
    /// Pressure estimate against the trigger, with hysteresis.
    pub(super) fn pressure_high(&mut self) -> bool {
        let window = self.p.cfg.window as f64;
        let est = match self.last_prompt {
            Some((prompt, at)) => prompt + cx::estimate(&self.items[at.min(self.items.len())..]),
            None => cx::estimate(&self.items),
        } as f64;
        if !self.compact_armed {
            if est < window * (cx::TRIGGER_RATIO - cx::HYSTERESIS_RATIO) {
                self.compact_armed = true;
            }
            return false;
        }
        est >= window * cx::TRIGGER_RATIO
    }

    /// Asks the turn's own provider for a summary; the deterministic excerpt when it fails.
    async fn summarize(&self, middle: &[Message]) -> (String, &'static str) {
        let req = self.request(
            Arc::new(vec![
                Message::new(Role::System, cx::SUMMARY_PROMPT),
                Message::new(Role::User, cx::render(middle)),
            ]),
            Arc::from([]),
        );
        let mut attrs = Map::new();
        attrs.insert("purpose".into(), json!("compaction"));
        let span = self.trace.start_span("llm.request", "llm", attrs);
        let mut s = self.p.provider.stream(
            LlmRequest {
                raw_chunks: false,
                ..req
            },
            self.handle.cancel.clone(),
        );
        let mut text = String::new();
        let mut failed = None;
        loop {
            let item = tokio::select! {
                item = s.next() => item,
                _ = self.handle.cancel.cancelled() => Some(Err(crate::llm::LlmError::Cancelled)),
            };
            let Some(item) = item else { break };
            match item {
                Ok(LlmEvent::Content { text: t }) => text.push_str(&t),
                Ok(_) => {}
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            }
        }
        let mut end = Map::new();
        if let Some(e) = &failed {
            end.insert("error".into(), json!(e));
        }
        self.trace
            .end_span(span, if failed.is_some() { "error" } else { "ok" }, end);
        if failed.is_none() && !text.trim().is_empty() {
            (text, "provider")
        } else {
            (cx::excerpt_summary(middle), "excerpt")
        }
    }

    /// Folds old tool results and summarizes the middle; records start, summary, boundary
    /// and the re-seed, in that order, each committed.
    pub(super) async fn compact(
        &mut self,
        action: BoundaryAction,
        reason: &str,
        hook: &str,
    ) -> Result<(), String> {
        self.flush().await?;
        let window = self.p.cfg.window;
        let pre = cx::estimate(&self.items);
        let mut items = Vec::clone(&self.items);
        let folded = cx::fold_tool_results(
            &mut items,
            pick(window, cx::KEEP_TOOL_RESULTS),
            pick(window, cx::FOLD_EXCERPT_CHARS),
        );
        let mut summary = None;
        let mut replaced = 0;
        if let Some((h, t)) = cx::middle(&items, pick(window, cx::KEEP_LAST_MESSAGES)) {
            let (text, source) = self.summarize(&items[h..t]).await;
            replaced = t - h;
            items = cx::splice(&items, h, t, &text);
            summary = Some((text, source));
        }
        let mut n = Map::new();
        n.insert("hook".into(), json!(hook));
        n.insert("action".into(), json!(action.as_str()));
        n.insert("reason".into(), json!(reason));
        n.insert("round".into(), json!(self.rounds));
        self.compact_armed = false;
        if folded == 0 && summary.is_none() {
            n.insert("compacted".into(), json!(false));
            n.insert(
                "detail".into(),
                json!("nothing to compact: the transcript is already minimal"),
            );
            self.notice("hook_action", n);
            return Ok(());
        }
        let post = cx::estimate(&items);
        let id = crate::store::ids::random_hex(8);
        let summary_text = summary.as_ref().map(|s| s.0.clone()).unwrap_or_default();
        let (rec, act, rsn) = (self.record_id.clone(), action, reason.to_string());
        let cid = id.clone();
        persist::call(&self.agent.store, move |s| {
            let mut extra = Map::new();
            extra.insert("pre_tokens".into(), json!(pre));
            s.append_compaction(
                &rec,
                &CompactionMarker::Start {
                    compaction_id: cid.clone(),
                    reason: rsn.clone(),
                    action: act,
                    extra,
                },
            )?;
            s.append_compaction(
                &rec,
                &CompactionMarker::Summary {
                    compaction_id: cid.clone(),
                    summary_text,
                },
            )?;
            s.append_boundary(
                &rec,
                &Boundary {
                    reason: rsn,
                    action: act,
                    turn_id: None,
                    replacement_count: Some(replaced as u64),
                    pre_tokens: Some(pre),
                    post_tokens: Some(post),
                    compaction_id: Some(cid),
                },
            )
        })
        .await
        .map_err(|e| format!("cannot record the compaction in {}: {e}", self.record_id))?;
        persist::append_seed(&self.agent.store, &self.record_id, &items)
            .await
            .map_err(|e| {
                format!(
                    "cannot record the compacted transcript in {}: {e}",
                    self.record_id
                )
            })?;
        self.kinds = items.iter().map(persist::kind_for).collect();
        self.persisted = items.len();
        self.items = Arc::new(items);
        self.canonical = None;
        self.last_prompt = None;
        n.insert("compacted".into(), json!(true));
        n.insert("preTokens".into(), json!(pre));
        n.insert("postTokens".into(), json!(post));
        n.insert("foldedToolResults".into(), json!(folded));
        n.insert("summarizedMessages".into(), json!(replaced));
        if let Some((_, source)) = summary {
            n.insert("summary".into(), json!(source));
        }
        n.insert("compactionId".into(), json!(id));
        self.notice("hook_action", n);
        Ok(())
    }
}
