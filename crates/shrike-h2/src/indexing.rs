//! A stateful HPACK encoder (RFC 7541 §2.3.2, §4, §6.2.1) for heads a connection sends again
//! and again: the first time, each field goes out as a literal with incremental indexing; from
//! then on it is one byte or two, an index into the peer's dynamic table.
//!
//! The encoder keeps its own copy of the table the peer's decoder builds from what it sent, so
//! the indices it writes are the ones the peer holds. That only holds if blocks reach the peer
//! in the order they were encoded: callers encode a block with it only when they send it.
//! Blocks from the stateless [`crate::hpack::encode_field`] never touch the table and can go
//! out in any order between them.

use std::collections::VecDeque;

use crate::hpack::{
    static_index, write_int, write_string, StaticIndex, ENTRY_OVERHEAD, STATIC_TABLE,
};

/// The table size the protocol starts with (SETTINGS_HEADER_TABLE_SIZE's default), and the
/// most this encoder uses even when the peer allows more.
pub const DEFAULT_TABLE_SIZE: usize = 4096;

#[derive(Debug)]
pub struct Encoder {
    /// Newest first: entry `i` is HPACK index 62 + `i`.
    entries: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max: usize,
    /// A size the peer lowered its table to, still to be announced at the start of a block.
    pending_update: Option<usize>,
    /// Changes whenever an entry is added or evicted (so an index may mean another field).
    generation: u64,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder {
            entries: VecDeque::new(),
            size: 0,
            max: DEFAULT_TABLE_SIZE,
            pending_update: None,
            generation: 0,
        }
    }
}

impl Encoder {
    /// The peer's SETTINGS_HEADER_TABLE_SIZE. Below the size in use, the table shrinks (oldest
    /// entries first) and the next block announces it (§4.2, §6.3); above, nothing changes.
    pub fn set_peer_limit(&mut self, limit: usize) {
        if limit < self.max {
            self.max = limit;
            self.evict_to(limit);
            self.pending_update = Some(limit);
        }
    }

    /// Starts a block (any block, stateless ones too): writes a pending size update.
    pub fn start_block(&mut self, out: &mut Vec<u8>) {
        if let Some(size) = self.pending_update.take() {
            write_int(out, 0x20, 5, size);
        }
    }

    /// Whether a block must start with a size update.
    pub fn has_pending_update(&self) -> bool {
        self.pending_update.is_some()
    }

    /// Counts the table's changes: a block encoded at one generation means the same at the
    /// same generation, so it can be sent again as it is.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Appends one field: indexed when the peer's table (or the static table) has it, else a
    /// literal that the peer adds to its table. `name` must be lowercase.
    pub fn field(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        let static_name = match static_index(name, value) {
            StaticIndex::Field(i) => return write_int(out, 0x80, 7, i),
            StaticIndex::Name(i) => i,
        };
        if let Some(i) = self.entries.iter().position(|(n, v)| n == name && v == value) {
            write_int(out, 0x80, 7, STATIC_TABLE.len() + 1 + i);
            return;
        }
        let entry = name.len() + value.len() + ENTRY_OVERHEAD;
        if entry > self.max {
            // It would empty the table and not fit: a literal without indexing instead.
            write_int(out, 0x00, 4, static_name);
        } else {
            write_int(out, 0x40, 6, static_name);
            self.evict_to(self.max - entry);
            self.entries.push_front((name.to_vec(), value.to_vec()));
            self.size += entry;
            self.generation += 1;
        }
        if static_name == 0 {
            write_string(out, name);
        }
        write_string(out, value);
    }

    fn evict_to(&mut self, size: usize) {
        while self.size > size {
            let Some((n, v)) = self.entries.pop_back() else { break };
            self.size -= n.len() + v.len() + ENTRY_OVERHEAD;
            self.generation += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpack::Decoder;

    fn decoded(decoder: &mut Decoder, block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut fields = Vec::new();
        decoder.decode(block, |n, v| fields.push((n.to_vec(), v.to_vec()))).expect("decodes");
        fields
    }

    #[test]
    fn repeated_fields_become_indices_the_peer_resolves() {
        let mut encoder = Encoder::default();
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        let head: [(&[u8], &[u8]); 4] = [
            (b":status", b"200"),
            (b"server", b"shrike"),
            (b"date", b"Wed, 02 Dec 2026 07:00:00 GMT"),
            (b"content-length", b"64"),
        ];
        let mut first = Vec::new();
        for (n, v) in head {
            encoder.field(&mut first, n, v);
        }
        let generation = encoder.generation();
        let mut second = Vec::new();
        for (n, v) in head {
            encoder.field(&mut second, n, v);
        }
        assert_eq!(encoder.generation(), generation, "nothing new was indexed");
        // :status 200 is static; the other three are one byte each now.
        assert_eq!(second.len(), 4, "{second:?}");
        assert!(first.len() > 30);
        let want: Vec<_> = head.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
        assert_eq!(decoded(&mut decoder, &first), want);
        assert_eq!(decoded(&mut decoder, &second), want);
        // A new date is indexed alongside; the old entries' indices move and still resolve.
        let mut third = Vec::new();
        encoder.field(&mut third, b"date", b"Wed, 02 Dec 2026 07:00:01 GMT");
        encoder.field(&mut third, b"server", b"shrike");
        let fields = decoded(&mut decoder, &third);
        assert_eq!(fields[0].1, b"Wed, 02 Dec 2026 07:00:01 GMT");
        assert_eq!(fields[1].1, b"shrike");
    }

    #[test]
    fn a_lowered_limit_is_announced_and_honoured() {
        let mut encoder = Encoder::default();
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        let mut block = Vec::new();
        encoder.field(&mut block, b"x-a", &[b'a'; 100]);
        decoded(&mut decoder, &block);
        // The peer allows none: the next block says so first, and nothing is indexed again.
        encoder.set_peer_limit(0);
        assert!(encoder.has_pending_update());
        let mut block = Vec::new();
        encoder.start_block(&mut block);
        encoder.field(&mut block, b"x-a", &[b'a'; 100]);
        assert_eq!(block[0], 0x20, "size update to 0 first");
        assert_eq!(decoded(&mut decoder, &block), [(b"x-a".to_vec(), vec![b'a'; 100])]);
        let mut again = Vec::new();
        encoder.field(&mut again, b"x-a", &[b'a'; 100]);
        // A literal without indexing (0000 prefix), the value Huffman-coded (100 × 5 bits).
        assert_eq!((again[0] & 0xf0, again.len()), (0x00, 1 + 1 + 3 + 1 + 63), "{again:?}");
        // A field larger than the whole table is sent without indexing.
        let mut encoder = Encoder::default();
        let mut big = Vec::new();
        encoder.field(&mut big, b"x-big", &[b'b'; 5000]);
        assert_eq!(big[0] & 0xf0, 0x00);
        assert_eq!(decoded(&mut Decoder::new(DEFAULT_TABLE_SIZE), &big)[0].1.len(), 5000);
    }
}
