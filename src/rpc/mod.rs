//! JSON-RPC 2.0 over stdio: framing, the server core over any byte streams (bounded intake,
//! control lane), classification, dispatch, the stdout writer, reverse requests and error
//! codes. Only this module knows wire codes.

pub mod dispatch;
pub mod error;
pub mod events;
pub mod frame;
pub mod intake;
pub mod methods;
pub mod reader;
pub mod reverse;
pub mod server;
pub mod writer;

pub use error::{ErrorKind, RpcError};
pub use reverse::{Reverse, ReverseError};
pub use writer::Out;
