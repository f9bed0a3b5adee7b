//! Fakes and helpers shared by the integration tests.

pub mod acp;
pub mod agents;
pub mod chat_helpers;
pub mod fake_openai;
pub mod fake_router;
pub mod headless;
pub mod host;
pub mod mcp_deps;
pub mod plugins;
