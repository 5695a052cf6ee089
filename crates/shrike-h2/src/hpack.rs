//! HPACK (RFC 7541) for both ends: a decoder for the peer's header blocks (the client's
//! responses, the server's requests) and a stateless encoder for request templates and response
//! heads.
//!
//! The decoder runs once per message, so it allocates nothing per field: raw strings are
//! handed out as slices of the block, Huffman strings are decoded into two scratch buffers it
//! keeps, and the dynamic table stores its entries in one byte arena that is compacted in
//! place. The callback sees each field before the next is decoded, so nothing is collected.
//!
//! The encoder only uses the static table and literals without indexing, so what we send never
//! depends on the dynamic table and the peer's SETTINGS_HEADER_TABLE_SIZE does not matter; a
//! block can be built once and sent many times.

use std::collections::VecDeque;
use std::fmt;

use crate::huffman::{self, HuffmanError};

/// Per-entry overhead in the table's size accounting (RFC 7541 §4.1).
pub(crate) const ENTRY_OVERHEAD: usize = 32;

/// At most this many continuation bytes per integer: values stay below 2^29, far above any
/// length or index a block can hold, and `usize` arithmetic cannot overflow even on 32 bits.
const MAX_INT_CONTINUATIONS: usize = 4;

/// The static table of RFC 7541 Appendix A; index `i` is HPACK index `i + 1`.
#[rustfmt::skip]
pub(crate) const STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),                   (b":method", b"GET"),
    (b":method", b"POST"),                  (b":path", b"/"),
    (b":path", b"/index.html"),             (b":scheme", b"http"),
    (b":scheme", b"https"),                 (b":status", b"200"),
    (b":status", b"204"),                   (b":status", b"206"),
    (b":status", b"304"),                   (b":status", b"400"),
    (b":status", b"404"),                   (b":status", b"500"),
    (b"accept-charset", b""),               (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),              (b"accept-ranges", b""),
    (b"accept", b""),                       (b"access-control-allow-origin", b""),
    (b"age", b""),                          (b"allow", b""),
    (b"authorization", b""),                (b"cache-control", b""),
    (b"content-disposition", b""),          (b"content-encoding", b""),
    (b"content-language", b""),             (b"content-length", b""),
    (b"content-location", b""),             (b"content-range", b""),
    (b"content-type", b""),                 (b"cookie", b""),
    (b"date", b""),                         (b"etag", b""),
    (b"expect", b""),                       (b"expires", b""),
    (b"from", b""),                         (b"host", b""),
    (b"if-match", b""),                     (b"if-modified-since", b""),
    (b"if-none-match", b""),                (b"if-range", b""),
    (b"if-unmodified-since", b""),          (b"last-modified", b""),
    (b"link", b""),                         (b"location", b""),
    (b"max-forwards", b""),                 (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),          (b"range", b""),
    (b"referer", b""),                      (b"refresh", b""),
    (b"retry-after", b""),                  (b"server", b""),
    (b"set-cookie", b""),                   (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),            (b"user-agent", b""),
    (b"vary", b""),                         (b"via", b""),
    (b"www-authenticate", b""),
];

/// Why a header block could not be decoded. Any of them is a connection error of type
/// COMPRESSION_ERROR (RFC 9113 §4.3): the decoder's table may be half updated afterwards, so
/// the connection, and the decoder with it, must be dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HpackError {
    /// Index 0, or past the end of the static and dynamic tables.
    BadIndex(usize),
    /// An integer longer than the implementation limit.
    IntegerOverflow,
    /// The block ends inside an integer or a string.
    Truncated,
    /// A Huffman-coded string that §5.2 rejects.
    Huffman(HuffmanError),
    /// A dynamic table size update above the SETTINGS_HEADER_TABLE_SIZE we announced.
    SizeUpdateTooLarge { requested: usize, allowed: usize },
    /// A dynamic table size update after the block's first field (§4.2).
    SizeUpdateAfterField,
}

impl fmt::Display for HpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HpackError::BadIndex(index) => write!(f, "HPACK: index {index} out of range"),
            HpackError::IntegerOverflow => f.write_str("HPACK: integer overflow"),
            HpackError::Truncated => f.write_str("HPACK: truncated block"),
            HpackError::Huffman(e) => write!(f, "HPACK: invalid Huffman code ({e})"),
            HpackError::SizeUpdateTooLarge { requested, allowed } => {
                write!(f, "HPACK: table size update {requested} above the {allowed} allowed")
            }
            HpackError::SizeUpdateAfterField => {
                f.write_str("HPACK: table size update after a field")
            }
        }
    }
}

impl std::error::Error for HpackError {}

impl From<HuffmanError> for HpackError {
    fn from(e: HuffmanError) -> Self {
        HpackError::Huffman(e)
    }
}

/// Decodes the header blocks of one connection; it holds that connection's dynamic table.
pub struct Decoder {
    table: DynamicTable,
    /// The SETTINGS_HEADER_TABLE_SIZE we announced, the ceiling for the peer's size updates.
    max_allowed: usize,
    /// Scratch for Huffman-coded names and values, kept to reuse their capacity.
    name_buf: Vec<u8>,
    value_buf: Vec<u8>,
}

impl Decoder {
    /// `max_table_size` is the SETTINGS_HEADER_TABLE_SIZE we announce (4096 by default); the
    /// table starts at that size, as RFC 7541 §4.2 and RFC 9113 §6.5.2 have it.
    pub fn new(max_table_size: usize) -> Decoder {
        Decoder {
            table: DynamicTable::new(max_table_size),
            max_allowed: max_table_size,
            name_buf: Vec::new(),
            value_buf: Vec::new(),
        }
    }

    /// Decodes one complete header block (HEADERS plus any CONTINUATION), calling
    /// `field(name, value)` for each field in order. On error some fields may already have
    /// been delivered; see [`HpackError`] for what the caller must do.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut pos = 0;
        let mut seen_field = false;
        while let Some(&first) = block.get(pos) {
            if first & 0x80 != 0 {
                // §6.1 Indexed Header Field.
                let index = read_int(block, &mut pos, 7)?;
                let (name, value) = self.table.field(index)?;
                field(name, value);
            } else if first & 0x40 != 0 {
                // §6.2.1 Literal with Incremental Indexing.
                self.literal(block, &mut pos, 6, true, &mut field)?;
            } else if first & 0x20 != 0 {
                // §6.3 Dynamic Table Size Update: only before the first field (§4.2).
                if seen_field {
                    return Err(HpackError::SizeUpdateAfterField);
                }
                let size = read_int(block, &mut pos, 5)?;
                if size > self.max_allowed {
                    let allowed = self.max_allowed;
                    return Err(HpackError::SizeUpdateTooLarge { requested: size, allowed });
                }
                self.table.set_max_size(size);
                continue;
            } else {
                // §6.2.2 Without Indexing (0000) and §6.2.3 Never Indexed (0001) decode alike;
                // a decoder that never re-encodes has no use for the distinction.
                self.literal(block, &mut pos, 4, false, &mut field)?;
            }
            seen_field = true;
        }
        Ok(())
    }

    /// A literal field whose first byte is at `pos`, with a `prefix_bits` name index.
    fn literal(
        &mut self,
        block: &[u8],
        pos: &mut usize,
        prefix_bits: u32,
        indexing: bool,
        field: &mut impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let name_index = read_int(block, pos, prefix_bits)?;
        let Decoder { table, name_buf, value_buf, .. } = self;
        // A dynamic name borrows the table, which the insert then mutates, so the two name
        // sources take separate paths.
        if let Some(dynamic) = name_index.checked_sub(STATIC_TABLE.len() + 1) {
            let (name, _) = table.get(dynamic).ok_or(HpackError::BadIndex(name_index))?;
            let value = read_string(block, pos, value_buf)?;
            field(name, value);
            if indexing {
                table.insert(Name::Entry(dynamic), value);
            }
        } else {
            let name = match name_index.checked_sub(1) {
                None => read_string(block, pos, name_buf)?,
                Some(i) => STATIC_TABLE.get(i).ok_or(HpackError::BadIndex(name_index))?.0,
            };
            let value = read_string(block, pos, value_buf)?;
            field(name, value);
            if indexing {
                table.insert(Name::Bytes(name), value);
            }
        }
        Ok(())
    }
}

/// Reads an integer with an N-bit prefix (§5.1) starting at `pos`, advancing `pos`. QPACK's
/// integers are these too (RFC 9204 §4.1.1).
pub fn read_int(block: &[u8], pos: &mut usize, prefix_bits: u32) -> Result<usize, HpackError> {
    let mask = (1usize << prefix_bits) - 1;
    let first = *block.get(*pos).ok_or(HpackError::Truncated)?;
    *pos += 1;
    let mut value = usize::from(first) & mask;
    if value < mask {
        return Ok(value);
    }
    for shift in (0..MAX_INT_CONTINUATIONS * 7).step_by(7) {
        let byte = *block.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        value += usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(HpackError::IntegerOverflow)
}

/// Reads a string literal (§5.2): a slice of `block` when raw, `scratch` when Huffman-coded.
/// The length is checked against the block before anything is read or reserved.
fn read_string<'a>(
    block: &'a [u8],
    pos: &mut usize,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], HpackError> {
    let huffman = block.get(*pos).is_some_and(|b| b & 0x80 != 0);
    let len = read_int(block, pos, 7)?;
    let end = pos.checked_add(len).ok_or(HpackError::Truncated)?;
    let raw = block.get(*pos..end).ok_or(HpackError::Truncated)?;
    *pos = end;
    if !huffman {
        return Ok(raw);
    }
    scratch.clear();
    huffman::decode(raw, scratch)?;
    Ok(scratch)
}

/// Appends one field to a header block: an Indexed Header Field (§6.1) when the static
/// table has exactly this field, else a Literal without Indexing (§6.2.2) naming the lowest
/// static entry with this name, or with a literal name. `name` must already be lowercase.
///
/// Only the static table is used, so the block decodes the same whatever the peer's table
/// holds and can be built once (a request template, a response head) and sent many times.
/// Credentials go as Never Indexed literals (§6.2.3, §7.1.3), so a proxy on the way does not
/// index them either.
pub fn encode_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let name_index = match static_index(name, value) {
        StaticIndex::Field(i) => return write_int(out, 0x80, 7, i),
        StaticIndex::Name(i) => i,
    };
    let sensitive = matches!(name, b"authorization" | b"proxy-authorization" | b"cookie");
    write_int(out, if sensitive { 0x10 } else { 0x00 }, 4, name_index);
    if name_index == 0 {
        write_string(out, name);
    }
    write_string(out, value);
}

/// Where a field stands in the static table.
pub(crate) enum StaticIndex {
    /// This index holds the whole field.
    Field(usize),
    /// The lowest index holding its name, or 0 for none.
    Name(usize),
}

pub(crate) fn static_index(name: &[u8], value: &[u8]) -> StaticIndex {
    let mut name_index = 0;
    for (i, &(n, v)) in STATIC_TABLE.iter().enumerate() {
        if n == name {
            if v == value {
                return StaticIndex::Field(i + 1);
            }
            if name_index == 0 {
                name_index = i + 1;
            }
        }
    }
    StaticIndex::Name(name_index)
}

/// Writes `value` with an N-bit prefix (§5.1); `flags` holds the bits above the prefix. QPACK's
/// integers are these too (RFC 9204 §4.1.1).
pub fn write_int(out: &mut Vec<u8>, flags: u8, prefix_bits: u32, value: usize) {
    let mask = (1usize << prefix_bits) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Writes a string literal (§5.2), Huffman-coded only when that is strictly shorter.
pub(crate) fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    let coded_len = huffman::encoded_len(s);
    if coded_len < s.len() {
        write_int(out, 0x80, 7, coded_len);
        huffman::encode(s, out);
    } else {
        write_int(out, 0x00, 7, s.len());
        out.extend_from_slice(s);
    }
}

/// Where a new table entry's name comes from.
enum Name<'a> {
    Bytes(&'a [u8]),
    /// The name of the entry at this dynamic index (0 = newest), which the insert may evict.
    Entry(usize),
}

/// Position of one entry's name and value in the table's arena.
#[derive(Clone, Copy)]
struct Entry {
    start: usize,
    name_len: usize,
    value_len: usize,
}

impl Entry {
    fn size(&self) -> usize {
        self.name_len + self.value_len + ENTRY_OVERHEAD
    }
}

/// The dynamic table (§2.3.2, §4). Names and values live back to back in `bytes` in insertion
/// order, so eviction (oldest first) only frees the front of the live region. The dead prefix
/// is dropped once it outgrows `max_size`, so the arena stays under about twice the table size
/// and each byte is moved at most once per `max_size` bytes inserted.
struct DynamicTable {
    bytes: Vec<u8>,
    /// Newest first, so HPACK index 62 is `entries[0]`.
    entries: VecDeque<Entry>,
    /// Sum of the entries' sizes (§4.1).
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    fn new(max_size: usize) -> DynamicTable {
        DynamicTable { bytes: Vec::new(), entries: VecDeque::new(), size: 0, max_size }
    }

    /// The field at HPACK `index`, counting the static table first (§2.3.3).
    fn field(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        let found = match index.checked_sub(1) {
            Some(i) if i < STATIC_TABLE.len() => STATIC_TABLE.get(i).copied(),
            Some(i) => self.get(i - STATIC_TABLE.len()),
            None => None,
        };
        found.ok_or(HpackError::BadIndex(index))
    }

    /// The entry at dynamic index `i` (0 = newest).
    fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let e = self.entries.get(i)?;
        let (name, rest) = self.bytes.get(e.start..)?.split_at_checked(e.name_len)?;
        Some((name, rest.get(..e.value_len)?))
    }

    /// Adds an entry (§4.4): evicts until it fits, or empties the table if it never can.
    fn insert(&mut self, name: Name<'_>, value: &[u8]) {
        let name_len = match name {
            Name::Bytes(bytes) => bytes.len(),
            Name::Entry(i) => self.entries.get(i).map_or(0, |e| e.name_len),
        };
        let size = name_len + value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            self.entries.clear();
            self.size = 0;
            self.bytes.clear();
            return;
        }
        // Copy the name before evicting: it may belong to an entry this insert evicts, and
        // eviction leaves the arena's bytes in place until `compact`.
        let start = self.bytes.len();
        match name {
            Name::Bytes(bytes) => self.bytes.extend_from_slice(bytes),
            Name::Entry(i) => {
                if let Some(e) = self.entries.get(i) {
                    // In bounds: every entry's bytes are in the arena.
                    let range = e.start..e.start + e.name_len;
                    self.bytes.extend_from_within(range);
                }
            }
        }
        self.bytes.extend_from_slice(value);
        self.evict_to(self.max_size - size);
        self.entries.push_front(Entry { start, name_len, value_len: value.len() });
        self.size += size;
        self.compact();
    }

    /// Applies a size update (§4.3), evicting what no longer fits.
    fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
        self.compact();
    }

    /// Evicts oldest entries until the table's size is at most `limit`.
    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            let Some(oldest) = self.entries.pop_back() else { break };
            self.size -= oldest.size();
        }
    }

    /// Drops the arena's dead prefix once it is larger than the table can be.
    fn compact(&mut self) {
        let Some(oldest) = self.entries.back() else {
            self.bytes.clear();
            return;
        };
        let live = oldest.start;
        if live > self.max_size {
            self.bytes.drain(..live);
            for e in &mut self.entries {
                e.start -= live;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::huffman::tests::{hex, Rng};

    type Fields = Vec<(Vec<u8>, Vec<u8>)>;

    fn decode(d: &mut Decoder, block: &[u8]) -> Result<Fields, HpackError> {
        let mut fields = Vec::new();
        d.decode(block, |n, v| fields.push((n.to_vec(), v.to_vec()))).map(|()| fields)
    }

    fn owned(fields: &[(&str, &str)]) -> Fields {
        fields.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
    }

    /// The dynamic table, newest first, after checking its size against its entries.
    fn table(d: &Decoder) -> Fields {
        let t = &d.table;
        let entries: Fields = (0..t.entries.len())
            .map(|i| t.get(i).unwrap())
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        let size: usize = entries.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
        assert_eq!(t.size, size, "recorded size");
        assert!(t.size <= t.max_size);
        entries
    }

    fn encoded(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, value) in fields {
            encode_field(&mut out, name, value);
        }
        out
    }

    #[test]
    fn c1_integer_representation() {
        // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit prefix; C.1.3: 42 at an
        // octet boundary.
        for (value, prefix, coded) in [(10, 5, "0a"), (1337, 5, "1f9a0a"), (42, 8, "2a")] {
            let mut out = Vec::new();
            write_int(&mut out, 0, prefix, value);
            assert_eq!(out, hex(coded), "{value}");
            let mut pos = 0;
            assert_eq!(read_int(&out, &mut pos, prefix), Ok(value));
            assert_eq!(pos, out.len());
        }
        // The bits above the prefix are not part of the value.
        assert_eq!(read_int(&[0xea], &mut 0, 5), Ok(10));
        assert_eq!(read_int(&hex("ff9a0a"), &mut 0, 5), Ok(1337));
    }

    #[test]
    fn integers_round_trip_at_every_boundary() {
        for prefix in 4..=8 {
            for value in [0, 1, 14, 15, 16, 30, 31, 32, 126, 127, 128, 254, 255, 256, 16_510]
                .into_iter()
                .chain([16_511, 2_097_278, 2_097_279, (1 << 28) - 1])
            {
                let mut out = Vec::new();
                write_int(&mut out, 0, prefix, value);
                let mut pos = 0;
                assert_eq!(read_int(&out, &mut pos, prefix), Ok(value), "{prefix} {value}");
                assert_eq!(pos, out.len());
            }
        }
    }

    #[test]
    fn integer_overflow_and_truncation_are_rejected() {
        // A fifth continuation byte: the limit, whatever its value.
        assert_eq!(
            read_int(&hex("1f ff ff ff ff 0f"), &mut 0, 5),
            Err(HpackError::IntegerOverflow)
        );
        assert_eq!(
            read_int(&hex("1f 80 80 80 80 00"), &mut 0, 5),
            Err(HpackError::IntegerOverflow)
        );
        let endless = [0xffu8; 1000];
        assert_eq!(read_int(&endless, &mut 0, 7), Err(HpackError::IntegerOverflow));
        // Four are accepted.
        assert_eq!(read_int(&hex("1f ff ff ff 7f"), &mut 0, 5), Ok(31 + (1 << 28) - 1));
        assert_eq!(read_int(&hex("1f"), &mut 0, 5), Err(HpackError::Truncated));
        assert_eq!(read_int(&hex("1f 80"), &mut 0, 5), Err(HpackError::Truncated));
        // The same through the decoder, as an index and as a string length.
        let mut d = Decoder::new(4096);
        assert_eq!(decode(&mut d, &hex("ff ff ff ff ff 0f")), Err(HpackError::IntegerOverflow));
        let mut d = Decoder::new(4096);
        assert_eq!(decode(&mut d, &hex("04 7f ff ff ff ff 0f")), Err(HpackError::IntegerOverflow));
    }

    #[test]
    fn c2_literal_and_indexed_fields() {
        let cases = [
            // C.2.1 with indexing, C.2.2 without, C.2.3 never indexed, C.2.4 indexed.
            (
                "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
                ("custom-key", "custom-header"),
                true,
            ),
            ("040c 2f73 616d 706c 652f 7061 7468", (":path", "/sample/path"), false),
            ("1008 7061 7373 776f 7264 0673 6563 7265 74", ("password", "secret"), false),
            ("82", (":method", "GET"), false),
        ];
        for (block, field, indexed) in cases {
            let mut d = Decoder::new(4096);
            assert_eq!(decode(&mut d, &hex(block)).unwrap(), owned(&[field]));
            let want = if indexed { owned(&[field]) } else { Vec::new() };
            assert_eq!(table(&d), want, "{block}");
        }
        let mut d = Decoder::new(4096);
        decode(&mut d, &hex(cases[0].0)).unwrap();
        assert_eq!(d.table.size, 55);
    }

    const REQ1: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
    ];
    const REQ2: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
        ("cache-control", "no-cache"),
    ];
    const REQ3: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        (":authority", "www.example.com"),
        ("custom-key", "custom-value"),
    ];
    const REQ_TABLES: [&[(&str, &str)]; 3] = [
        &[(":authority", "www.example.com")],
        &[("cache-control", "no-cache"), (":authority", "www.example.com")],
        &[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ],
    ];

    const C3: [&str; 3] = [
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ];
    const C4: [&str; 3] = [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ];

    const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
    const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
    const LOCATION: &str = "https://www.example.com";
    const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
    const RESP1: &[(&str, &str)] = &[
        (":status", "302"),
        ("cache-control", "private"),
        ("date", DATE1),
        ("location", LOCATION),
    ];
    const RESP2: &[(&str, &str)] = &[
        (":status", "307"),
        ("cache-control", "private"),
        ("date", DATE1),
        ("location", LOCATION),
    ];
    const RESP3: &[(&str, &str)] = &[
        (":status", "200"),
        ("cache-control", "private"),
        ("date", DATE2),
        ("location", LOCATION),
        ("content-encoding", "gzip"),
        ("set-cookie", COOKIE),
    ];
    const RESP_TABLES: [&[(&str, &str)]; 3] = [
        &[
            ("location", LOCATION),
            ("date", DATE1),
            ("cache-control", "private"),
            (":status", "302"),
        ],
        &[
            (":status", "307"),
            ("location", LOCATION),
            ("date", DATE1),
            ("cache-control", "private"),
        ],
        &[("set-cookie", COOKIE), ("content-encoding", "gzip"), ("date", DATE2)],
    ];
    const RESP_SIZES: [usize; 3] = [222, 222, 215];

    const C5: [&str; 3] = [
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
         3d31",
    ];
    const C6: [&str; 3] = [
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ];

    #[test]
    fn c3_and_c4_requests_share_one_table() {
        for blocks in [C3, C4] {
            let mut d = Decoder::new(4096);
            for (i, want) in [REQ1, REQ2, REQ3].into_iter().enumerate() {
                assert_eq!(decode(&mut d, &hex(blocks[i])).unwrap(), owned(want), "{}", blocks[i]);
                assert_eq!(table(&d), owned(REQ_TABLES[i]), "{}", blocks[i]);
                assert_eq!(d.table.size, [57, 110, 164][i]);
            }
        }
    }

    #[test]
    fn c5_and_c6_responses_evict_from_a_256_byte_table() {
        for blocks in [C5, C6] {
            let mut d = Decoder::new(256);
            for (i, want) in [RESP1, RESP2, RESP3].into_iter().enumerate() {
                assert_eq!(decode(&mut d, &hex(blocks[i])).unwrap(), owned(want), "{}", blocks[i]);
                assert_eq!(table(&d), owned(RESP_TABLES[i]), "{}", blocks[i]);
                assert_eq!(d.table.size, RESP_SIZES[i]);
            }
        }
    }

    #[test]
    fn every_truncation_is_ok_or_truncated() {
        // Cutting a block either falls between fields (Ok, fewer fields) or inside one; a
        // string is never decoded past the end, so it is never a Huffman error.
        for blocks in [C3, C4, C5, C6] {
            let max = if blocks == C3 || blocks == C4 { 4096 } else { 256 };
            for i in 0..3 {
                let full = hex(blocks[i]);
                for cut in 0..full.len() {
                    let mut d = Decoder::new(max);
                    for earlier in &blocks[..i] {
                        decode(&mut d, &hex(earlier)).unwrap();
                    }
                    match decode(&mut d, &full[..cut]) {
                        Ok(fields) => assert!(fields.len() < 6),
                        Err(e) => {
                            assert_eq!(e, HpackError::Truncated, "{} cut at {cut}", blocks[i])
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn index_zero_and_past_the_tables_are_errors() {
        let mut d = Decoder::new(4096);
        assert_eq!(decode(&mut d, &[0x80]), Err(HpackError::BadIndex(0)));
        // 62 is the first dynamic index; the table is empty.
        assert_eq!(decode(&mut d, &hex("be")), Err(HpackError::BadIndex(62)));
        assert_eq!(decode(&mut d, &hex("7e 01 78")), Err(HpackError::BadIndex(62)));
        assert_eq!(decode(&mut d, &hex("0f 2f 01 78")), Err(HpackError::BadIndex(62)));
        // 61 is the last static entry; with one dynamic entry, 62 works and 63 does not.
        assert_eq!(decode(&mut d, &hex("bd")).unwrap(), owned(&[("www-authenticate", "")]));
        decode(&mut d, &hex(C3[0])).unwrap();
        assert_eq!(
            decode(&mut d, &hex("be")).unwrap(),
            owned(&[(":authority", "www.example.com")])
        );
        assert_eq!(decode(&mut d, &hex("bf")), Err(HpackError::BadIndex(63)));
        assert_eq!(decode(&mut d, &hex("7f 01 01 78")), Err(HpackError::BadIndex(64)));
        assert_eq!(
            HpackError::BadIndex(70).to_string(),
            "HPACK: index 70 out of range",
            "the message names the index"
        );
    }

    #[test]
    fn size_updates_are_bounded_and_only_at_the_start() {
        let mut d = Decoder::new(4096);
        decode(&mut d, &hex(C3[0])).unwrap();
        // 4097 (3f e2 1f) is above what we announced.
        let err = decode(&mut d, &hex("3fe21f 82")).unwrap_err();
        assert_eq!(err, HpackError::SizeUpdateTooLarge { requested: 4097, allowed: 4096 });
        assert_eq!(err.to_string(), "HPACK: table size update 4097 above the 4096 allowed");
        // After a field, even a harmless one.
        assert_eq!(decode(&mut d, &hex("82 3fe11f")), Err(HpackError::SizeUpdateAfterField));
        assert_eq!(
            HpackError::SizeUpdateAfterField.to_string(),
            "HPACK: table size update after a field"
        );

        let mut d = Decoder::new(4096);
        decode(&mut d, &hex(C3[0])).unwrap();
        // Two updates before the first field: 0 empties the table, then back to 4096.
        assert_eq!(decode(&mut d, &hex("20 3fe11f 82")).unwrap(), owned(&[(":method", "GET")]));
        assert_eq!(table(&d), Vec::new());
        assert_eq!(d.table.max_size, 4096);
        // A shrink evicts the oldest entries first.
        decode(&mut d, &hex(C3[0])).unwrap();
        decode(&mut d, &hex(C3[1])).unwrap();
        assert_eq!(decode(&mut d, &hex("3f 15")).unwrap(), Vec::new()); // 31 + 21 = 52 < 53
        assert_eq!(table(&d), Vec::new());
        decode(&mut d, &hex("3f 37")).unwrap(); // 86: room for no-cache (53), not both
        decode(&mut d, &hex(C3[0])).unwrap();
        decode(&mut d, &hex(C3[1])).unwrap();
        assert_eq!(table(&d), owned(&[("cache-control", "no-cache")]));
        // And an entry the new size cannot hold is refused by the next literal.
        assert_eq!(decode(&mut d, &hex("be")), Ok(owned(&[("cache-control", "no-cache")])));
    }

    #[test]
    fn an_entry_larger_than_the_table_empties_it() {
        let mut d = Decoder::new(4096);
        decode(&mut d, &hex(C3[0])).unwrap();
        decode(&mut d, &hex(C3[1])).unwrap();
        let value = vec![b'v'; 4096 - 32 - 3 + 1];
        let mut block = vec![0x40, 3, b'b', b'i', b'g'];
        write_int(&mut block, 0, 7, value.len());
        block.extend_from_slice(&value);
        let fields = decode(&mut d, &block).unwrap();
        assert_eq!(fields, vec![(b"big".to_vec(), value.clone())]);
        assert_eq!(table(&d), Vec::new());
        assert_eq!(d.table.size, 0);
        // One byte less fits exactly, alone.
        decode(&mut d, &hex(C3[0])).unwrap();
        block = vec![0x40, 3, b'b', b'i', b'g'];
        write_int(&mut block, 0, 7, value.len() - 1);
        block.extend_from_slice(&value[1..]);
        decode(&mut d, &block).unwrap();
        assert_eq!(table(&d), vec![(b"big".to_vec(), value[1..].to_vec())]);
        assert_eq!(d.table.size, 4096);
    }

    #[test]
    fn a_new_entry_may_name_the_entry_it_evicts() {
        // RFC 7541 §4.4: the name must survive its entry's eviction.
        let mut d = Decoder::new(100);
        decode(&mut d, &hex("40 0a 637573746f6d2d6b6579 01 61")).unwrap(); // custom-key: a (43)
                                                                           // Literal with indexing, name = index 62, value of 20 bytes: 10 + 20 + 32 = 62, and
                                                                           // 43 + 62 > 100, so custom-key: a is evicted by the insert that names it.
        let mut block = hex("7e 14");
        block.extend_from_slice(&[b'z'; 20]);
        let fields = decode(&mut d, &block).unwrap();
        assert_eq!(fields, vec![(b"custom-key".to_vec(), vec![b'z'; 20])]);
        assert_eq!(table(&d), vec![(b"custom-key".to_vec(), vec![b'z'; 20])]);
    }

    #[test]
    fn the_arena_stays_bounded_under_churn() {
        let mut d = Decoder::new(256);
        let mut rng = Rng(7);
        for i in 0..5_000 {
            let len = rng.below(100);
            let value = rng.bytes(len);
            let mut block = vec![0x40 | 58]; // user-agent
            write_int(&mut block, 0, 7, value.len());
            block.extend_from_slice(&value);
            // Every few blocks re-index the newest entry by name, to copy from within.
            if i % 3 == 0 {
                block.extend_from_slice(&[0x7e, 0x01, b'x']);
            }
            decode(&mut d, &block).unwrap();
            let t = table(&d);
            assert!(d.table.bytes.len() <= 2 * 256 + 256, "arena {}", d.table.bytes.len());
            if i % 3 == 0 {
                assert_eq!(t[0], (b"user-agent".to_vec(), b"x".to_vec()));
                assert_eq!(t[1], (b"user-agent".to_vec(), value));
            } else {
                assert_eq!(t[0], (b"user-agent".to_vec(), value));
            }
        }
    }

    #[test]
    fn huffman_errors_surface_as_hpack_errors() {
        let mut d = Decoder::new(4096);
        // :path with a one-byte Huffman value of eight ones.
        let err = decode(&mut d, &hex("04 81 ff")).unwrap_err();
        assert_eq!(err, HpackError::Huffman(HuffmanError::Padding));
        assert!(err.to_string().starts_with("HPACK: invalid Huffman code"));
        // '0', then EOS inside the string.
        let err = decode(&mut d, &hex("04 85 07ffffffff")).unwrap_err();
        assert_eq!(err, HpackError::Huffman(HuffmanError::Eos));
    }

    #[test]
    fn a_string_longer_than_the_block_is_truncated() {
        let mut d = Decoder::new(4096);
        // Claims 2^28 bytes: rejected before anything is reserved.
        assert_eq!(decode(&mut d, &hex("04 ff ff ff ff 7f 61")), Err(HpackError::Truncated));
        assert_eq!(decode(&mut d, &hex("04 03 61 62")), Err(HpackError::Truncated));
        assert_eq!(decode(&mut d, &hex("00 83 61")), Err(HpackError::Truncated));
        assert!(d.value_buf.capacity() < 64 && d.name_buf.capacity() < 64);
    }

    #[test]
    fn random_blocks_never_panic() {
        let mut rng = Rng(0xdead_beef);
        let mut long_lived = Decoder::new(4096);
        for _ in 0..10_000 {
            let len = rng.below(64);
            let block = rng.bytes(len);
            let _ = decode(&mut Decoder::new(4096), &block);
            let _ = decode(&mut long_lived, &block);
            assert!(long_lived.table.size <= 4096);
        }
        // Bit flips in real blocks reach deeper than random bytes do.
        for _ in 0..10_000 {
            let mut d = Decoder::new(256);
            for text in C6 {
                let mut block = hex(text);
                let at = rng.below(block.len());
                block[at] ^= 1 << rng.below(8);
                let _ = decode(&mut d, &block);
            }
        }
    }

    #[test]
    fn encoder_uses_the_static_table() {
        let one = |name: &str, value: &str| {
            let mut out = Vec::new();
            encode_field(&mut out, name.as_bytes(), value.as_bytes());
            out
        };
        assert_eq!(one(":method", "GET"), [0x82]);
        assert_eq!(one(":method", "POST"), [0x83]);
        assert_eq!(one(":path", "/"), [0x84]);
        assert_eq!(one(":scheme", "https"), [0x87]);
        assert_eq!(one("accept-encoding", "gzip, deflate"), [0x90]);
        // Name from the static table (lowest index), value Huffman-coded as it is shorter.
        assert_eq!(one("cache-control", "no-cache"), hex("0f09 86 a8eb 1064 9cbf"));
        // The lowest index of a name with several entries: :status is 8..=14.
        assert_eq!(one(":status", "201"), hex("08 82 1003"));
        assert_eq!(one(":method", "PATCH"), hex("02 05 5041544348"));
        assert_eq!(
            one(":authority", "www.example.com"),
            hex("01 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")
        );
        // New name; "custom-key" codes to 8 bytes, "\x00\x01" would grow, so it stays raw.
        assert_eq!(one("custom-key", "\x00\x01"), hex("00 8825a849e95ba97d7f 02 0001"));
        // Static name index above 15 needs a continuation byte: user-agent is 58.
        assert_eq!(one("user-agent", "x"), [0x0f, 58 - 15, 0x01, b'x']);
        // Credentials are never indexed (0001 prefix): authorization is 23, cookie 32.
        assert_eq!(one("authorization", "x"), [0x1f, 23 - 15, 0x01, b'x']);
        assert_eq!(one("cookie", "x"), [0x1f, 32 - 15, 0x01, b'x']);
        // An empty value matches the static entry itself.
        assert_eq!(one("user-agent", ""), [0x80 | 58]);
    }

    #[test]
    fn encoded_fields_decode_back() {
        let long = "x".repeat(200);
        let longer: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let binary: Vec<u8> = (0..=255).collect();
        let fields: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"GET"),
            (b":method", b"PUT"),
            (b":scheme", b"https"),
            (b":path", b"/api/v1/items?id=42&sort=desc"),
            (b":authority", b"example.com:8443"),
            (b"user-agent", b"shrike/0.1"),
            (b"accept", b"*/*"),
            (b"accept-encoding", b"gzip, deflate"),
            (b"content-type", b"application/json"),
            (b"x-request-id", b"0f8e2c1a-77b1-4bde-9f3e-5d2a6c1b9e04"),
            (b"x-empty", b""),
            (b"cookie", b""),
            (b"x-binary", &binary),
            (b"x-long", long.as_bytes()),
            (b"x-longer", &longer),
            (&binary[1..], b"binary name"),
        ];
        let block = encoded(&fields);
        let mut d = Decoder::new(4096);
        let got = decode(&mut d, &block).unwrap();
        let want: Fields = fields.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
        assert_eq!(got, want);
        // Nothing was indexed, so any server table state decodes it the same.
        assert_eq!(table(&d), Vec::new());
    }

    /// The head of a typical nginx response: first sent as literals with incremental indexing
    /// (static names, Huffman values where shorter), then as indices into the dynamic table.
    fn nginx_blocks() -> (Vec<u8>, Vec<u8>) {
        let fields: [(usize, &[u8]); 7] = [
            (54, b"nginx/1.22.1"),
            (33, b"Tue, 14 Jan 2025 10:00:00 GMT"),
            (31, b"text/html"),
            (28, b"64"),
            (44, b"Mon, 13 Jan 2025 09:00:00 GMT"),
            (34, b"\"6784d5a0-40\""),
            (18, b"bytes"),
        ];
        let mut first = vec![0x88]; // :status 200
        for (name_index, value) in fields {
            write_int(&mut first, 0x40, 6, name_index);
            write_string(&mut first, value);
        }
        // Newest is 62, so the first literal (server) is now 68.
        let repeat = hex("88 c4 c3 c2 c1 c0 bf be");
        (first, repeat)
    }

    #[test]
    fn nginx_blocks_decode() {
        let (first, repeat) = nginx_blocks();
        let mut d = Decoder::new(4096);
        let a = decode(&mut d, &first).unwrap();
        let b = decode(&mut d, &repeat).unwrap();
        assert_eq!(a, b);
        assert_eq!(a[1], (b"server".to_vec(), b"nginx/1.22.1".to_vec()));
        assert_eq!(a.len(), 8);
    }

    /// `cargo test --release -- --ignored --nocapture bench`: 1,000,000 decodes of each block,
    /// in ten rounds; the fastest round is reported, as the machine may be shared.
    #[test]
    #[ignore]
    fn bench_nginx_response_head() {
        use std::hint::black_box;
        use std::time::Instant;
        const ROUND: u32 = 100_000;
        let (first, repeat) = nginx_blocks();
        let run = |d: &mut Decoder, block: &[u8]| {
            let mut best = f64::MAX;
            for _ in 0..10 {
                let start = Instant::now();
                let mut total = 0usize;
                for _ in 0..ROUND {
                    d.decode(black_box(block), |n, v| total += n.len() + v.len()).unwrap();
                }
                black_box(total);
                best = best.min(start.elapsed().as_nanos() as f64 / f64::from(ROUND));
            }
            best
        };
        let mut d = Decoder::new(4096);
        d.decode(&first, |_, _| {}).unwrap();
        let indexed = run(&mut d, &repeat);
        // The literal block re-inserts its 7 entries every time, so the table churns.
        let literal = run(&mut Decoder::new(4096), &first);
        println!("nginx head, {} bytes, all indexed: {indexed:.1} ns/block", repeat.len());
        println!(
            "nginx head, {} bytes, literal + Huffman + insert: {literal:.1} ns/block",
            first.len()
        );
    }
}
