//! The integration tests, one binary: each module spawns the real `outrigger` binary and
//! talks to it over its pipes as a host would. One binary links once instead of once per
//! file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod support;

mod acp;
mod apply_edits;
mod backpressure;
mod bash;
mod bash_session;
mod catalog_rpc;
mod chat;
mod chat_cancel;
mod chat_compaction;
mod chat_durability;
mod config;
mod fs_tools;
#[path = "../../fuzz/oracles.rs"]
mod fuzz_oracles;
mod fuzz_props;
mod headless_run;
mod history_cache;
mod host_fs;
mod host_tools;
mod inspect;
mod interaction;
mod lifecycle;
mod llm_provider;
mod mcp_client;
mod mcp_server;
mod native_providers;
mod orchestration;
mod params_strict;
mod plugins_rpc;
mod processes;
mod run_code;
mod sandbox;
mod sandbox_git;
mod sandbox_secrets;
mod schemas;
mod search_tools;
mod sessions;
mod skills_rpc;
mod subagents;
mod tool_search_fixture;
mod tools_rpc;
mod trace_export;
mod traces;
mod transport;
mod view_image;
mod warm_spawn;
mod web_tools;
mod workspace_safety;
