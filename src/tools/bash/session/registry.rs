//! The live `bash_session` terminals, per chat (a turn's session key; `context.sessionId` for
//! `tool.invoke`). A chat sees only its own; a finished terminal stays until a call has
//! returned its last output.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::terminal::Terminal;

#[derive(Default)]
pub struct Terminals {
    chats: Mutex<HashMap<String, Vec<Arc<Terminal>>>>,
    next: AtomicU64,
}

/// Why a terminal could not be added.
pub struct Full {
    pub max: usize,
    /// The live terminal idle longest.
    pub idlest: Option<Arc<Terminal>>,
}

impl Terminals {
    fn chats(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Arc<Terminal>>>> {
        self.chats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh id, unique in this process.
    pub fn next_id(&self) -> String {
        format!("bs{}", self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Whether `chat` may start one more (finished terminals whose output nobody read are
    /// forgotten first, oldest first, to make room).
    pub fn admit(&self, chat: &str, max: usize) -> Result<(), Full> {
        let mut chats = self.chats();
        let Some(list) = chats.get_mut(chat) else {
            return Ok(());
        };
        while list.len() >= max {
            match list.iter().position(|t| !t.running()) {
                Some(i) => {
                    list.remove(i);
                }
                None => break,
            }
        }
        if list.len() < max {
            return Ok(());
        }
        Err(Full {
            max,
            idlest: list.iter().max_by_key(|t| t.idle()).cloned(),
        })
    }

    /// Adds `t` unless `chat` is full by now (a concurrent start); then `t` is handed back.
    pub fn insert(&self, chat: &str, t: Arc<Terminal>, max: usize) -> Result<(), Arc<Terminal>> {
        let mut chats = self.chats();
        let list = chats.entry(chat.to_string()).or_default();
        if list.iter().filter(|t| t.running()).count() >= max {
            return Err(t);
        }
        list.push(t);
        Ok(())
    }

    pub fn get(&self, chat: &str, id: &str) -> Option<Arc<Terminal>> {
        self.chats()
            .get(chat)
            .and_then(|l| l.iter().find(|t| t.id == id).cloned())
    }

    pub fn remove(&self, chat: &str, id: &str) -> Option<Arc<Terminal>> {
        let mut chats = self.chats();
        let list = chats.get_mut(chat)?;
        let i = list.iter().position(|t| t.id == id)?;
        let t = list.remove(i);
        if list.is_empty() {
            chats.remove(chat);
        }
        Some(t)
    }

    pub fn list(&self, chat: &str) -> Vec<Arc<Terminal>> {
        self.chats().get(chat).cloned().unwrap_or_default()
    }

    /// Ends every terminal of `chat` (its turn was cancelled).
    pub fn end_chat(&self, chat: &str) -> usize {
        let ended = self.chats().remove(chat).unwrap_or_default();
        for t in &ended {
            t.end();
        }
        ended.len()
    }
}
