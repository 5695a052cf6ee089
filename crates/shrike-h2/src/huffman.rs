//! HPACK's static Huffman code (RFC 7541 §5.2 and Appendix B).
//!
//! Servers Huffman-code most response header values, so decoding sits on the response hot path:
//! a 64-bit bit reader and a 4096-entry table, each lookup yielding up to two symbols, with a
//! canonical-code walk for the rare codes longer than 12 bits. Encoding only builds request
//! templates once, so it is the plain bit-accumulator loop.
//!
//! Appendix B is a *canonical* Huffman code (codes of one length are consecutive, in symbol
//! order, and each length continues where the previous one stopped), so the table below holds
//! only the code lengths and every code is derived from them at compile time. The tests pin a
//! sample of codes and the RFC's examples, which a single mistyped length would break.

use std::fmt;

/// Code length in bits of each symbol 0..=255, then EOS (256), as listed in Appendix B.
#[rustfmt::skip]
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //   0..16
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //  16..32
     6, 10, 10, 12, 13,  6,  8, 11, 10, 10,  8, 11,  8,  6,  6,  6, //  ' '..'/'
     5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8, 15,  6, 12, 10, //  '0'..'?'
    13,  6,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7, //  '@'..'O'
     7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8, 13, 19, 13, 14,  6, //  'P'..'_'
    15,  5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5, //  '`'..'o'
     6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7, 15, 11, 14, 13, 28, //  'p'..127
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 128..144
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 144..160
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 160..176
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 176..192
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 192..208
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 208..224
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 224..240
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 240..256
    30,                                                             // EOS
];

const EOS: u16 = 256;
const MAX_LEN: usize = 30;

/// Each symbol's code, right-aligned.
const CODES: [u32; 257] = Canonical::build().codes;

/// The canonical layout, which the slow decoding path walks one length at a time.
struct Canonical {
    codes: [u32; 257],
    /// First code of each length (index = length).
    first: [u32; MAX_LEN + 1],
    /// How many codes have each length.
    count: [u16; MAX_LEN + 1],
    /// Where each length's symbols start in `symbols`.
    offset: [u16; MAX_LEN + 1],
    /// Symbols ordered by (length, symbol), i.e. by code.
    symbols: [u16; 257],
}

impl Canonical {
    const fn build() -> Canonical {
        let mut c = Canonical {
            codes: [0; 257],
            first: [0; MAX_LEN + 1],
            count: [0; MAX_LEN + 1],
            offset: [0; MAX_LEN + 1],
            symbols: [0; 257],
        };
        let (mut code, mut next, mut len) = (0u32, 0u16, 1);
        while len <= MAX_LEN {
            c.first[len] = code;
            c.offset[len] = next;
            let mut sym = 0;
            while sym < 257 {
                if LENGTHS[sym] as usize == len {
                    c.codes[sym] = code;
                    c.symbols[next as usize] = sym as u16;
                    code += 1;
                    next += 1;
                    c.count[len] += 1;
                }
                sym += 1;
            }
            code <<= 1;
            len += 1;
        }
        c
    }
}

static CANONICAL: Canonical = Canonical::build();

/// Bits looked at per fast lookup: every code of 12 bits or fewer (all of a-z, A-Z, 0-9 and
/// the common punctuation) decodes in one step, often with the next one; the table is 16 KiB.
const FAST_BITS: u32 = 12;
const FAST_MASK: u64 = (1 << FAST_BITS) - 1;

/// For each `FAST_BITS`-bit window, the one or two symbols it holds completely, packed by
/// `fast_entry`; 0 when the window's first code is longer than `FAST_BITS`.
static FAST: [u32; 1 << FAST_BITS] = build_fast();

const fn build_fast() -> [u32; 1 << FAST_BITS] {
    // Pass 1: the single symbol whose code prefixes each window, as `sym | len << 16`.
    let mut one = [0u32; 1 << FAST_BITS];
    let mut sym = 0;
    while sym < 256 {
        let len = LENGTHS[sym] as u32;
        if len <= FAST_BITS {
            let start = (CODES[sym] << (FAST_BITS - len)) as usize;
            let mut i = 0;
            while i < 1 << (FAST_BITS - len) {
                one[start + i] = sym as u32 | len << 16;
                i += 1;
            }
        }
        sym += 1;
    }
    // Pass 2: a second symbol, if the bits after the first hold all of its code. Looking it up
    // with zeros shifted in is sound because a code that fits the known bits ignores the rest.
    let mut fast = [0u32; 1 << FAST_BITS];
    let mut w = 0;
    while w < 1 << FAST_BITS {
        let first = one[w];
        let len1 = first >> 16;
        if len1 != 0 {
            let second = one[(w << len1) & FAST_MASK as usize];
            let len2 = second >> 16;
            fast[w] = if len2 != 0 && len2 <= FAST_BITS - len1 {
                fast_entry(first & 0xff, second & 0xff, 2, len1, len1 + len2)
            } else {
                fast_entry(first & 0xff, 0, 1, len1, len1)
            };
        }
        w += 1;
    }
    fast
}

/// A fast-table entry: bits consumed in 0..5 and bit 5 clear, so the entry itself is the shift
/// count (shifts use the low 6 bits); symbol count in 6..8; the symbols in 8..16 and 16..24;
/// the first symbol's length in 24..28, for the end of the string where only it may fit.
const fn fast_entry(sym1: u32, sym2: u32, n: u32, len1: u32, used: u32) -> u32 {
    used | n << 6 | sym1 << 8 | sym2 << 16 | len1 << 24
}

/// Why a Huffman-coded string was rejected (RFC 7541 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HuffmanError {
    /// The string contains the EOS symbol.
    Eos,
    /// The string ends in more than 7 bits, or in bits that are not a prefix of EOS (all ones).
    Padding,
}

impl fmt::Display for HuffmanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HuffmanError::Eos => "EOS symbol in string",
            HuffmanError::Padding => "bad padding",
        })
    }
}

impl std::error::Error for HuffmanError {}

/// Decodes `src`, appending to `dst`; on error `dst` is left as it was.
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let start = dst.len();
    // Every code is at least 5 bits, so `src` decodes to at most `len * 8 / 5` bytes. The 8
    // spare bytes let the bulk loop store 8-byte chunks (it stops while 48 bits, room for 9
    // symbols, remain) and a step store a byte past its symbol. Sizing the output once keeps
    // the loops free of capacity checks.
    dst.resize(start + src.len() / 5 * 8 + 8, 0);
    let result = decode_into(src, &mut dst[start..]);
    dst.truncate(start + *result.as_ref().unwrap_or(&0));
    result.map(drop)
}

/// Decodes into `out`, which must have the room `decode` gives it; returns the length.
fn decode_into(src: &[u8], out: &mut [u8]) -> Result<usize, HuffmanError> {
    let mut r = BitReader { acc: 0, bits: 0, rest: src };
    // The string's bits not yet decoded; `r` reads on past them as ones, EOS's prefix.
    let mut left = src.len().saturating_mul(8);
    let mut o = 0;
    loop {
        r.refill();
        if left < 4 * FAST_BITS as usize {
            break;
        }
        // Four steps take at most 48 of the 56 bits loaded, and cannot pass the end. A step
        // whose entry is 0 (a longer code) does nothing, nor do the ones after it, as the
        // window stays put, so only the last entry needs checking. The steps write at most 8
        // bytes, which `decode` leaves room for.
        let chunk = &mut out[o..o + 8];
        let (mut p, mut used, mut entry) = (0, 0, 0);
        for _ in 0..4 {
            entry = FAST[(r.acc >> (64 - FAST_BITS)) as usize];
            chunk[p] = (entry >> 8) as u8;
            chunk[p + 1] = (entry >> 16) as u8;
            p += (entry >> 6 & 3) as usize;
            // The shift count is the entry's low 6 bits: `used`, with bit 5 always clear.
            r.acc = r.acc.wrapping_shl(entry);
            used += entry & 0x1f;
        }
        o += p;
        r.bits -= used;
        left -= used as usize;
        if entry == 0 {
            r.refill();
            let (sym, len) = long_code(r.acc, left)?;
            out[o] = sym;
            o += 1;
            r.acc <<= len;
            r.bits -= len;
            left -= len as usize;
        }
    }
    // The string's last bits, fewer than 4 * FAST_BITS, are all loaded: no more refills, and
    // one symbol at a time, each checked against `left`.
    let mut acc = r.acc;
    loop {
        let window = acc | u64::MAX >> left;
        let entry = FAST[(window >> (64 - FAST_BITS)) as usize];
        let len1 = entry >> 24 & 0xf;
        if entry != 0 && len1 as usize <= left {
            let entry = if (entry & 0x1f) as usize <= left {
                entry
            } else {
                fast_entry(entry >> 8 & 0xff, 0, 1, len1, len1) // only the first symbol fits
            };
            out[o] = (entry >> 8) as u8;
            out[o + 1] = (entry >> 16) as u8;
            o += (entry >> 6 & 3) as usize;
            acc <<= entry & 0x1f;
            left -= (entry & 0x1f) as usize;
            continue;
        }
        if left <= 7 && window == u64::MAX {
            return Ok(o); // at most 7 bits of padding, all ones
        }
        let (sym, len) = long_code(window, left)?;
        out[o] = sym;
        o += 1;
        acc <<= len;
        left -= len as usize;
    }
}

/// The next `bits` bits of the stream at the top of `acc`. Below them are zeros or bits
/// loaded ahead, which the next refill ORs over with the same values.
struct BitReader<'a> {
    acc: u64,
    bits: u32,
    rest: &'a [u8],
}

impl BitReader<'_> {
    /// Loads to 56..=63 bits without branching on the count (libdeflate's trick); past the
    /// end of the string it loads ones.
    #[inline(always)]
    fn refill(&mut self) {
        let word = match self.rest.first_chunk::<8>() {
            Some(word) => u64::from_be_bytes(*word),
            None => padded(self.rest),
        };
        self.acc |= word >> self.bits;
        self.rest = self.rest.get(((63 - self.bits) >> 3) as usize..).unwrap_or_default();
        self.bits |= 56;
    }
}

/// The last (fewer than 8) bytes of the string as a big-endian word padded with ones.
fn padded(rest: &[u8]) -> u64 {
    let mut word = [0xff; 8];
    for (w, r) in word.iter_mut().zip(rest) {
        *w = *r;
    }
    u64::from_be_bytes(word)
}

/// Decodes the code longer than `FAST_BITS` at the top of `window`, of which `left` bits are
/// the string's; returns the symbol and its length.
#[inline(never)]
fn long_code(window: u64, left: usize) -> Result<(u8, u32), HuffmanError> {
    let (sym, len) = decode_slow(window >> (64 - MAX_LEN));
    if len as usize > left {
        // The string ends inside the code: padding longer than 7 bits or not all ones.
        return Err(HuffmanError::Padding);
    }
    if sym == EOS {
        return Err(HuffmanError::Eos);
    }
    Ok((sym as u8, len))
}

/// Canonical decoding of the symbol at the top of a 30-bit window: the first length whose
/// codes extend past the window's prefix of that length. Always finds one, as the code is
/// complete; returns the symbol and its length.
fn decode_slow(window: u64) -> (u16, u32) {
    let window = window & ((1 << MAX_LEN) - 1);
    let c = &CANONICAL;
    for len in 5..=MAX_LEN {
        let code = (window >> (MAX_LEN - len)) as u32;
        let past = code.wrapping_sub(c.first[len]);
        if past < u32::from(c.count[len]) {
            let index = usize::from(c.offset[len]) + past as usize;
            return (c.symbols.get(index).copied().unwrap_or(EOS), len as u32);
        }
    }
    (EOS, MAX_LEN as u32)
}

/// Appends the Huffman coding of `src` to `dst`, padded with the most significant bits of EOS.
pub fn encode(src: &[u8], dst: &mut Vec<u8>) {
    let (mut acc, mut bits) = (0u64, 0u32);
    for &byte in src {
        let len = u32::from(LENGTHS[usize::from(byte)]);
        acc = acc << len | u64::from(CODES[usize::from(byte)]);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            dst.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        dst.push((acc << (8 - bits) | 0xff >> bits) as u8);
    }
}

/// Length in bytes of `encode(src)`, to choose between Huffman and raw before encoding.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: u64 = src.iter().map(|&b| u64::from(LENGTHS[usize::from(b)])).sum();
    usize::try_from(bits.div_ceil(8)).unwrap_or(usize::MAX)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    /// Every Huffman-coded string of RFC 7541 Appendix C.4 and C.6.
    const RFC_STRINGS: &[(&str, &str)] = &[
        ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        ("no-cache", "a8eb 1064 9cbf"),
        ("custom-key", "25a8 49e9 5ba9 7d7f"),
        ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        ("302", "6402"),
        ("307", "640e ff"),
        ("private", "aec3 771a 4b"),
        ("Mon, 21 Oct 2013 20:13:21 GMT", "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"),
        ("Mon, 21 Oct 2013 20:13:22 GMT", "d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff"),
        ("https://www.example.com", "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"),
        ("gzip", "9bd9 ab"),
        (
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 \
             3160 65c0 03ed 4ee5 b106 3d50 07",
        ),
    ];

    fn decoded(src: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        decode(src, &mut out).map(|()| out)
    }

    fn encoded(src: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(src, &mut out);
        out
    }

    /// xorshift64: deterministic, dependency-free randomness.
    pub struct Rng(pub(crate) u64);

    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        pub fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        pub fn bytes(&mut self, len: usize) -> Vec<u8> {
            (0..len).map(|_| self.next() as u8).collect()
        }
    }

    /// (code, length) to symbol.
    type Symbols = std::collections::HashMap<(u32, u32), usize>;

    /// Bit-at-a-time decoder straight from §5.2, to check the table-driven one against.
    fn reference_decode(symbols: &Symbols, src: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let (mut out, mut code, mut len) = (Vec::new(), 0u32, 0u32);
        for i in 0..src.len() * 8 {
            code = code << 1 | u32::from(src[i / 8] >> (7 - i % 8) & 1);
            len += 1;
            if let Some(&sym) = symbols.get(&(code, len)) {
                if sym == 256 {
                    return Err(HuffmanError::Eos);
                }
                out.push(sym as u8);
                (code, len) = (0, 0);
            }
        }
        if len > 7 || code != (1 << len) - 1 {
            return Err(HuffmanError::Padding);
        }
        Ok(out)
    }

    #[test]
    fn codes_match_appendix_b() {
        // (symbol, code, bits) rows typed from Appendix B, across every length class.
        let rows: [(usize, u32, u8); 16] = [
            (0, 0x1ff8, 13),
            (1, 0x7fffd8, 23),
            (9, 0xffffea, 24),
            (10, 0x3ffffffc, 30),
            (22, 0x3ffffffe, 30),
            (b' ' as usize, 0x14, 6),
            (b'!' as usize, 0x3f8, 10),
            (b'0' as usize, 0x0, 5),
            (b'/' as usize, 0x18, 6),
            (b'a' as usize, 0x3, 5),
            (b'z' as usize, 0x7b, 7),
            (b'\\' as usize, 0x7fff0, 19),
            (127, 0xffffffc, 28),
            (128, 0xfffe6, 20),
            (255, 0x3ffffee, 26),
            (256, 0x3fffffff, 30),
        ];
        for (sym, code, bits) in rows {
            assert_eq!((CODES[sym], LENGTHS[sym]), (code, bits), "symbol {sym}");
        }
    }

    #[test]
    fn code_is_complete_and_prefix_free() {
        // Kraft sum exactly 1: no gaps (every bit string decodes) and no overlap.
        let kraft: u64 = LENGTHS.iter().map(|&l| 1u64 << (30 - l)).sum();
        assert_eq!(kraft, 1 << 30);
        for a in 0..257 {
            for b in 0..257 {
                let (la, lb) = (u32::from(LENGTHS[a]), u32::from(LENGTHS[b]));
                if a != b && la <= lb {
                    assert_ne!(CODES[b] >> (lb - la), CODES[a], "{a} prefixes {b}");
                }
            }
        }
    }

    #[test]
    fn rfc_strings_decode_and_encode() {
        for &(text, coded) in RFC_STRINGS {
            assert_eq!(decoded(&hex(coded)).unwrap(), text.as_bytes(), "{text}");
            assert_eq!(encoded(text.as_bytes()), hex(coded), "{text}");
            assert_eq!(encoded_len(text.as_bytes()), hex(coded).len(), "{text}");
        }
    }

    #[test]
    fn round_trips_every_byte_value() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decoded(&encoded(&all)).unwrap(), all);
        // Every pair, so each symbol is decoded at every bit offset and after every other.
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(decoded(&encoded(&[a, b])).unwrap(), [a, b]);
            }
        }
    }

    #[test]
    fn densest_strings_fit_the_output_room() {
        // All 5-bit codes: the most symbols per input byte, at every length around the
        // bulk loop's thresholds.
        for len in 0..200 {
            for text in [vec![b'0'; len], b"0ace".repeat(len / 4 + 1)[..len].to_vec()] {
                assert_eq!(decoded(&encoded(&text)).unwrap(), text);
            }
        }
    }

    #[test]
    fn round_trips_random_strings() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..5_000 {
            let len = rng.below(80);
            let mut s = rng.bytes(len);
            // Mostly text, as real headers are, so the two-symbol fast path is exercised.
            for b in s.iter_mut().filter(|b| **b >= 0x60) {
                *b = b'a' + *b % 26;
            }
            let coded = encoded(&s);
            assert_eq!(coded.len(), encoded_len(&s));
            assert_eq!(decoded(&coded).unwrap(), s);
        }
    }

    #[test]
    fn agrees_with_reference_decoder_on_random_input() {
        let symbols: Symbols = (0..257).map(|s| ((CODES[s], u32::from(LENGTHS[s])), s)).collect();
        let mut rng = Rng(12345);
        for _ in 0..20_000 {
            let len = rng.below(12);
            let src = rng.bytes(len);
            assert_eq!(decoded(&src), reference_decode(&symbols, &src), "{src:02x?}");
        }
        // Valid strings with their tail corrupted probe the padding rules.
        for _ in 0..20_000 {
            let len = rng.below(10);
            let mut src = encoded(&rng.bytes(len));
            if let Some(last) = src.last_mut() {
                *last ^= 1 << rng.below(8);
            }
            assert_eq!(decoded(&src), reference_decode(&symbols, &src), "{src:02x?}");
        }
    }

    #[test]
    fn empty_string_decodes_to_nothing() {
        assert_eq!(decoded(&[]).unwrap(), b"");
        assert!(encoded(b"").is_empty());
    }

    #[test]
    fn rejects_eos_in_string() {
        // '0' (00000), then EOS (30 ones), then 5 bits of padding.
        assert_eq!(decoded(&hex("07 ff ff ff ff")), Err(HuffmanError::Eos));
        // EOS first, with two more ones after it.
        assert_eq!(decoded(&hex("ff ff ff ff")), Err(HuffmanError::Eos));
    }

    #[test]
    fn rejects_padding_of_eight_bits_or_more() {
        assert_eq!(decoded(&hex("ff")), Err(HuffmanError::Padding));
        // '0' then 11 ones.
        assert_eq!(decoded(&hex("07 ff")), Err(HuffmanError::Padding));
        // "307" (6402 0e) followed by a whole byte of ones.
        assert_eq!(decoded(&hex("640e ff ff")), Err(HuffmanError::Padding));
    }

    #[test]
    fn rejects_padding_with_a_zero_bit() {
        // '0' then 000.
        assert_eq!(decoded(&hex("00")), Err(HuffmanError::Padding));
        // 'a' (00011) then 110.
        assert_eq!(decoded(&hex("1e")), Err(HuffmanError::Padding));
        // "www.example.com" with its last padding bit cleared.
        assert_eq!(decoded(&hex("f1e3 c2e5 f23a 6ba0 ab90 f4fe")), Err(HuffmanError::Padding));
    }
    /// `cargo test --release -- --ignored --nocapture bench`: the fastest of ten rounds.
    #[test]
    #[ignore]
    fn bench_huffman_decode() {
        use std::hint::black_box;
        use std::time::Instant;
        let date = b"Tue, 14 Jan 2025 10:00:00 GMT".to_vec();
        for text in [date.clone(), date.repeat(40)] {
            let coded = encoded(&text);
            let mut out = Vec::with_capacity(text.len() + 64);
            let rounds = 4_000_000 / coded.len() as u32;
            let mut best = f64::MAX;
            for _ in 0..10 {
                let start = Instant::now();
                for _ in 0..rounds {
                    out.clear();
                    decode(black_box(&coded), &mut out).unwrap();
                    black_box(&out);
                }
                best = best.min(start.elapsed().as_nanos() as f64 / f64::from(rounds));
            }
            let per_byte = best / coded.len() as f64;
            println!("Huffman, {} coded bytes: {best:.1} ns ({per_byte:.2} ns/byte)", coded.len());
        }
    }
}
