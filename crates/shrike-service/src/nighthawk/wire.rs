//! Nighthawk's execution messages as raw bytes, read and written against the API's
//! descriptors: [`Raw`] carries a message through tonic untouched, [`decode`] turns it into a
//! `DynamicMessage` that keeps every field, declared or not, and [`to_json`] / [`from_json`]
//! convert to and from proto3 JSON with the proto field names (Nighthawk's option names,
//! which Shrike's spec and result use).

use std::sync::OnceLock;

use prost::bytes::{Buf, BufMut};
use prost::encoding::{decode_varint, encode_key, encode_varint, DecodeContext, WireType};
use prost::{DecodeError, Message};
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, ReflectMessage,
    SerializeOptions, Value as PValue,
};
use serde_json::Value;

/// A protobuf message kept as its encoded bytes (fields in the order they arrived).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Raw(pub Vec<u8>);

impl Message for Raw {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.0);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        // Each value is read with prost's own decoders (which check lengths and wire types)
        // and written back as it was.
        encode_key(tag, wire_type, &mut self.0);
        match wire_type {
            WireType::Varint => encode_varint(decode_varint(buf)?, &mut self.0),
            WireType::SixtyFourBit => {
                let mut v = 0u64;
                prost::encoding::fixed64::merge(wire_type, &mut v, buf, ctx)?;
                self.0.extend_from_slice(&v.to_le_bytes());
            }
            WireType::ThirtyTwoBit => {
                let mut v = 0u32;
                prost::encoding::fixed32::merge(wire_type, &mut v, buf, ctx)?;
                self.0.extend_from_slice(&v.to_le_bytes());
            }
            WireType::LengthDelimited => {
                let mut v: Vec<u8> = Vec::new();
                prost::encoding::bytes::merge(wire_type, &mut v, buf, ctx)?;
                encode_varint(v.len() as u64, &mut self.0);
                self.0.extend_from_slice(&v);
            }
            // Proto3 has no groups; prost's own error says the wire type is wrong.
            WireType::StartGroup | WireType::EndGroup => {
                prost::encoding::check_wire_type(WireType::LengthDelimited, wire_type)?
            }
        }
        Ok(())
    }

    fn encoded_len(&self) -> usize {
        self.0.len()
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// The descriptors of Nighthawk's API, decoded once.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        // Invariant: the descriptor set was produced by protox from this crate's protos at
        // build time; it always decodes.
        #[allow(clippy::expect_used)]
        DescriptorPool::decode(super::DESCRIPTOR_SET).expect("the built-in descriptors decode")
    })
}

/// A message of the API by its full name (`nighthawk.client.ExecutionRequest`).
pub fn message(name: &str) -> MessageDescriptor {
    // Invariant: only names of messages declared in proto/nighthawk are asked for (tests
    // cover each); a typo is a bug found at once.
    #[allow(clippy::expect_used)]
    pool().get_message_by_name(name).expect("a message of Nighthawk's API")
}

/// Decodes `bytes` as message `name`, keeping fields the API copy does not declare.
pub fn decode(name: &str, bytes: &[u8]) -> Result<DynamicMessage, DecodeError> {
    DynamicMessage::decode(message(name), bytes)
}

/// The first field anywhere in `msg` that this copy of the API does not declare, as a path
/// (`transport_socket.typed_config… field 5`); `None` when every field is known.
pub fn unknown_field(msg: &DynamicMessage) -> Option<String> {
    if let Some(f) = msg.unknown_fields().next() {
        return Some(format!("field number {} of {}", f.number(), msg.descriptor().full_name()));
    }
    for (field, value) in msg.fields() {
        let found = match value {
            PValue::Message(m) => unknown_field(m),
            PValue::List(items) => items.iter().find_map(|v| match v {
                PValue::Message(m) => unknown_field(m),
                _ => None,
            }),
            PValue::Map(m) => m.values().find_map(|v| match v {
                PValue::Message(m) => unknown_field(m),
                _ => None,
            }),
            _ => None,
        };
        if let Some(inner) = found {
            return Some(format!("{}: {inner}", field.name()));
        }
    }
    None
}

/// proto3 JSON with Nighthawk's field names; fields at their defaults are left out.
pub fn to_json(msg: &DynamicMessage) -> Result<Value, String> {
    let opts = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(true)
        .stringify_64_bit_integers(true);
    msg.serialize_with_options(serde_json::value::Serializer, &opts).map_err(|e| e.to_string())
}

/// Message `name` from proto3 JSON; a field the message does not have is an error.
pub fn from_json(name: &str, json: &Value) -> Result<DynamicMessage, String> {
    let opts = DeserializeOptions::new().deny_unknown_fields(true);
    DynamicMessage::deserialize_with_options(message(name), json, &opts).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_carries_every_field_byte_for_byte() {
        let opts = serde_json::json!({
            "uri": "http://127.0.0.1:1/",
            "requests_per_second": 7,
            "labels": ["a", "b"],
        });
        let start = from_json("nighthawk.client.CommandLineOptions", &opts).unwrap();
        let mut bytes = start.encode_to_vec();
        // An undeclared field (number 999, a varint) travels too, and is found.
        bytes.extend_from_slice(&[0xb8, 0x3e, 0x05]);
        let raw = Raw::decode(bytes.as_slice()).unwrap();
        assert_eq!(raw.0, bytes);
        let back = decode("nighthawk.client.CommandLineOptions", &raw.0).unwrap();
        assert!(unknown_field(&back).unwrap().contains("field number 999"));
        let json = to_json(&back).unwrap();
        assert_eq!(json["requests_per_second"], 7);
        assert_eq!(json["labels"], serde_json::json!(["a", "b"]));
    }

    #[test]
    fn every_message_the_code_names_exists() {
        for name in [
            "nighthawk.client.ExecutionRequest",
            "nighthawk.client.ExecutionResponse",
            "nighthawk.client.CommandLineOptions",
            "nighthawk.client.Output",
            "nighthawk.request_source.RequestStreamResponse",
        ] {
            assert!(pool().get_message_by_name(name).is_some(), "{name}");
        }
    }
}
