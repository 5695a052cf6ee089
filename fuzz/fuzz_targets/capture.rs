//! Packet captures: pcap (either byte order, µs or ns) and pcapng, every link layer, TCP
//! reassembly and the splitters (HTTP, MySQL, delimited, fixed; picked by the first byte), on
//! any bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shrike_fuzz::capture(data));
