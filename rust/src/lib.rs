//! `kctl._engine`: the native half of kctl.
//!
//! PyO3 code lives only in `py/`; every other module is plain Rust so that `cargo test` exercises it
//! without an interpreter.

pub mod alloc;
pub mod context;
pub mod dataplane;
pub mod election;
pub mod hash;
pub mod hosted;
pub mod kafkawire;
pub mod metadata;
pub mod model;
mod py;
pub mod requests;
pub mod statemachine;
pub mod statetable;
pub mod store;
pub mod zkjson;
pub mod zkwire;
