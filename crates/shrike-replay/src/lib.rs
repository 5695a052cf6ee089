//! Shrike's replay of jobs files on the engine: [`timeline`] says when each job and request is
//! due (scaled, idle gaps shrunk, sharded), [`http`] fits captured requests to the target,
//! [`feeder`] reads the file lazily on a thread of its own and feeds the engine's workers
//! ([`shrike_engine::feed`]), and [`protocols`] are what non-HTTP jobs speak (raw TCP and
//! MySQL, on the engine's public `Protocol` seam); [`prepare`] sets a replay up on the engine
//! for every caller. The engine does the rest as for any run: one worker loop, the same
//! pools, statistics from the scheduled time. The engine knows nothing of jobs files or MySQL.

pub mod advice;
pub mod feeder;
pub mod http;
pub mod prepare;
pub mod protocols;
pub mod rewrite;
pub mod timeline;

pub use advice::{advice, Advice};
pub use feeder::{FeedEnd, FeedOptions, FeedProgress, Feeder, Reopen};
pub use prepare::{
    path_prefix, prepare, protocol_of, record, ReadyReplay, ReplayOptions, FEED_DEPTH,
};
pub use shrike_jobs::filter::Shard;
pub use timeline::{Placed, TimeOptions, Timeline};
