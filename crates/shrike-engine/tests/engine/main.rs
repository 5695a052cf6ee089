//! The engine through its library call, in one test binary: runs against the test server
//! in-process, sessions, and HTTP/2 servers that misbehave.
mod h2_faults;
mod library;
mod sessions;
