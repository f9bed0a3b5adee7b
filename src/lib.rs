//! Outrigger: an agent runtime sidecar speaking JSON-RPC 2.0 over stdio.
//! The binary (`main.rs`) is a thin shell over these modules.

pub mod app;
pub mod catch_panic;
pub mod cli;
pub mod config;
pub mod harness;
pub mod lifecycle;
pub mod logging;
pub mod protocol;
pub mod rpc;
pub mod serve;
pub mod tools;
