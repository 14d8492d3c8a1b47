//! The PostgreSQL frontend/backend protocol, version 3.0: decoding what clients send ([`frontend`]), encoding
//! what the server answers ([`backend`]) and the types of values on the wire ([`types`]).

pub mod backend;
pub mod frontend;
pub mod types;
