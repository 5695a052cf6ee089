//! Shrike's replay of jobs files on the engine: [`timeline`] says when each job and request is
//! due (scaled, idle gaps shrunk, sharded), [`http`] fits captured requests to the target, and
//! [`feeder`] reads the file lazily on a thread of its own and feeds the engine's workers
//! ([`shrike_engine::replay`]). The engine does the rest as for any run: one worker loop, the
//! same pools, statistics from the scheduled time.

pub mod feeder;
pub mod http;
pub mod timeline;

pub use feeder::{FeedEnd, FeedOptions, FeedProgress, Feeder};
pub use shrike_jobs::filter::Shard;
pub use timeline::{TimeOptions, Timeline};
