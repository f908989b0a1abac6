//! The wire types of pi's protocols, one module per wire (wire-and-capabilities floor: they
//! import only the stores and flows below them, never the session runtime or the modes).
//!
//! * [`rpc`]: `pi --mode rpc` commands, responses and events (spec rpc-protocol.md).

pub mod rpc;
