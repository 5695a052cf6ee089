//! Packet captures: pcap (either byte order, µs or ns) and pcapng, every link layer, TCP
//! reassembly and the splitters (HTTP, MySQL, delimited, fixed; picked by the first byte), on
//! any bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shrike_capture::{import_bytes, ImportOptions, Splitter};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let splitter = match which % 4 {
        0 => Splitter::Http,
        1 => Splitter::Mysql,
        2 => Splitter::Delimited(b"\n".to_vec()),
        _ => Splitter::Fixed(16),
    };
    let _ = import_bytes(rest, &ImportOptions { splitter, port: None });
});
