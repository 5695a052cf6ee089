//! Nighthawk's gRPC API, served and spoken by Shrike: `nighthawk.client.NighthawkService`
//! (`ExecutionStream`: a run from `CommandLineOptions`, answered with Nighthawk's `Output`)
//! and `nighthawk.request_source.NighthawkRequestSourceService` (`RequestStream`: requests
//! streamed to a load generator's workers).
//!
//! The proto is Shrike's copy of the subset of Nighthawk's API it implements
//! (`proto/nighthawk/`, see its README): Nighthawk's names and field numbers, so the wire
//! format is Nighthawk's. Execution messages are read and written dynamically against its
//! descriptors ([`wire`]): fields a client sends that this copy does not declare are kept and
//! refused by name, and Nighthawk's proto3 JSON maps straight onto Shrike's run spec and JSON
//! result, which already use Nighthawk's names.
//!
//! - [`options`]: `CommandLineOptions` to and from Shrike's run spec.
//! - [`output`]: Shrike's result to and from Nighthawk's `Output`.
//! - [`service`]: the `ExecutionStream` service; [`client`]: a run sent to such a service.
//! - [`request_source`]: the request-source service and the streams a run's workers read.

pub mod client;
pub mod options;
pub mod output;
pub mod request_source;
pub mod service;
pub mod wire;

/// The generated messages and services, one module per proto package.
#[allow(clippy::all, missing_docs, clippy::pedantic)]
pub mod proto {
    pub mod nighthawk {
        pub mod client {
            tonic::include_proto!("nighthawk.client");
        }
        pub mod request_source {
            tonic::include_proto!("nighthawk.request_source");
        }
    }
    pub mod envoy {
        pub mod config {
            pub mod core {
                pub mod v3 {
                    tonic::include_proto!("envoy.config.core.v3");
                }
            }
            pub mod metrics {
                pub mod v3 {
                    tonic::include_proto!("envoy.config.metrics.v3");
                }
            }
        }
        pub mod extensions {
            pub mod transport_sockets {
                pub mod tls {
                    pub mod v3 {
                        tonic::include_proto!("envoy.extensions.transport_sockets.tls.v3");
                    }
                }
            }
        }
        pub mod r#type {
            pub mod v3 {
                tonic::include_proto!("envoy.r#type.v3");
            }
        }
    }
    pub mod google {
        pub mod rpc {
            tonic::include_proto!("google.rpc");
        }
    }
}

/// The encoded descriptors of Nighthawk's API (as Shrike has it), for reflection.
pub const DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/nighthawk_descriptor.bin"));
