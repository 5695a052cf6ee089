//! The protocols replay speaks beyond HTTP, each a serial [`shrike_engine::protocol::Protocol`]
//! the engine's pool drives: raw TCP ([`tcp`]) and MySQL ([`mysql`]). A request's payload
//! carries what each needs beyond its bytes (a TCP message's answer size, a MySQL command).

pub mod mysql;
pub mod tcp;

pub use mysql::{Mysql, MysqlLogin, MysqlStep};
pub use tcp::{AnswerSize, RawTcp, TcpFraming};
