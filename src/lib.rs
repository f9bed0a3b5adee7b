//! Outrigger: an agent runtime sidecar speaking JSON-RPC 2.0 over stdio.
//! The binary (`main.rs`) is a thin shell over these modules.

pub mod acp;
pub mod agent;
pub mod app;
pub mod blocking;
pub mod catch_panic;
pub mod cli;
pub mod clock;
pub mod config;
pub mod harness;
pub mod headless;
pub mod host;
pub mod inspect;
pub mod lifecycle;
pub mod llm;
pub mod logging;
pub mod mcp;
pub mod memory;
pub mod otlp;
pub mod protocol;
pub mod rpc;
pub mod sandbox;
pub mod serve;
pub mod store;
pub mod strict;
pub mod tools;
