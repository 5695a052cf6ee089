//! Capture files as a stream of packets: pcap (either byte order, micro- or nanosecond
//! timestamps) and pcapng (several interfaces, each with its own link type and timestamp
//! resolution), read block by block through a fixed buffer, so a capture of any size needs
//! the memory of one packet. A damaged or truncated file yields every packet before the damage,
//! and says where it stopped and why.

use std::io::Read;
use std::time::Duration;

use pcap_parser::pcapng::Block;
use pcap_parser::{PcapBlockOwned, PcapError};

/// The read buffer: large enough for any packet tcpdump writes (its snap length is 256 KiB).
pub(crate) const BUFFER: usize = 4 << 20;
/// The smallest read buffer: the reader refills in steps of at least this.
pub(crate) const MIN_BUFFER: usize = 64 << 10;

/// One captured packet: when it was seen, its link type, and its bytes as captured.
#[derive(Debug)]
pub struct Packet<'a> {
    /// Since the Unix epoch.
    pub ts: Duration,
    pub linktype: i32,
    pub data: &'a [u8],
    /// The packet was cut short by the capture's snap length.
    pub truncated: bool,
}

/// Why a capture could not be read to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The file is no pcap or pcapng (nothing was read).
    NotACapture,
    /// The last record is cut off: the file ends inside it.
    Truncated {
        at: u64,
    },
    /// A record that cannot be parsed; nothing after it is read.
    Corrupt {
        at: u64,
        why: String,
    },
    /// A record longer than the read buffer.
    TooLarge {
        at: u64,
        /// The read buffer's size, which the record did not fit.
        limit: usize,
    },
    Io(String),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::NotACapture => write!(f, "not a pcap or pcapng capture"),
            Damage::Truncated { at } => write!(f, "the file ends inside a record at byte {at}"),
            Damage::Corrupt { at, why } => write!(f, "a corrupt record at byte {at}: {why}"),
            Damage::TooLarge { at, limit } => {
                write!(f, "a record at byte {at} is over {limit} bytes")
            }
            Damage::Io(e) => write!(f, "read error: {e}"),
        }
    }
}

/// pcapng interface: link type and timestamp units per second and offset.
#[derive(Clone, Copy, Debug)]
struct Interface {
    linktype: i32,
    units: u64,
    offset: i64,
}

/// Reads every packet of `input`, calling `each` for each; returns what stopped it early, if
/// anything did.
pub fn read(input: impl Read + Send, each: impl FnMut(Packet<'_>)) -> Option<Damage> {
    read_buffered(input, BUFFER, each)
}

/// [`read`] through a buffer of `buffer` bytes: a record larger than it is [`Damage::TooLarge`].
pub(crate) fn read_buffered(
    input: impl Read + Send,
    buffer: usize,
    mut each: impl FnMut(Packet<'_>),
) -> Option<Damage> {
    let mut reader = match pcap_parser::create_reader(buffer, input) {
        Ok(r) => r,
        Err(PcapError::HeaderNotRecognized | PcapError::Eof) => return Some(Damage::NotACapture),
        Err(e) => return Some(Damage::Io(format!("{e:?}"))),
    };
    // Legacy pcap: one link type and resolution for the file.
    let mut legacy = (1i32, false);
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut stalled = false;
    loop {
        let at = reader.consumed() as u64;
        match reader.next() {
            Ok((offset, block)) => {
                stalled = false;
                match block {
                    PcapBlockOwned::LegacyHeader(h) => {
                        legacy = (h.network.0, h.is_nanosecond_precision());
                    }
                    PcapBlockOwned::Legacy(b) => {
                        let frac = if legacy.1 {
                            Duration::from_nanos(u64::from(b.ts_usec))
                        } else {
                            Duration::from_micros(u64::from(b.ts_usec))
                        };
                        let len = (b.caplen as usize).min(b.data.len());
                        each(Packet {
                            ts: Duration::from_secs(u64::from(b.ts_sec)) + frac,
                            linktype: legacy.0,
                            data: &b.data[..len],
                            truncated: b.caplen < b.origlen,
                        });
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => interfaces.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(i)) => {
                        interfaces.push(Interface {
                            linktype: i.linktype.0,
                            units: i.ts_resolution().unwrap_or(1_000_000),
                            offset: i.ts_offset(),
                        });
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(p)) => {
                        let Some(i) = interfaces.get(p.if_id as usize) else {
                            reader.consume(offset);
                            continue;
                        };
                        let raw = (u64::from(p.ts_high) << 32) | u64::from(p.ts_low);
                        let ts = ng_time(raw, i.units, i.offset);
                        let len = (p.caplen as usize).min(p.data.len());
                        each(Packet {
                            ts,
                            linktype: i.linktype,
                            data: &p.data[..len],
                            truncated: p.caplen < p.origlen,
                        });
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(p)) => {
                        // No timestamp of its own: it cannot be placed in time.
                        let _ = p;
                    }
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(offset);
            }
            Err(PcapError::Eof) => return None,
            Err(PcapError::Incomplete(_)) => {
                // Twice in a row with nothing new: the file ends inside this record.
                if stalled {
                    return Some(Damage::Truncated { at });
                }
                stalled = true;
                if let Err(e) = reader.refill() {
                    return Some(match e {
                        PcapError::Eof | PcapError::UnexpectedEof => Damage::Truncated { at },
                        e => Damage::Io(format!("{e:?}")),
                    });
                }
            }
            Err(PcapError::UnexpectedEof) => return Some(Damage::Truncated { at }),
            Err(PcapError::BufferTooSmall) => return Some(Damage::TooLarge { at, limit: buffer }),
            Err(PcapError::ReadError) => {
                return Some(Damage::Io("the file could not be read".into()))
            }
            Err(e) => return Some(Damage::Corrupt { at, why: format!("{e:?}") }),
        }
    }
}

/// A pcapng timestamp: `raw` units of `1/units` s since `offset` seconds after the epoch.
fn ng_time(raw: u64, units: u64, offset: i64) -> Duration {
    let units = units.max(1);
    let secs = raw / units;
    let frac = raw % units;
    let nanos = (u128::from(frac) * 1_000_000_000 / u128::from(units)) as u64;
    let base = Duration::from_secs(secs) + Duration::from_nanos(nanos);
    if offset >= 0 {
        base + Duration::from_secs(offset as u64)
    } else {
        base.saturating_sub(Duration::from_secs(offset.unsigned_abs()))
    }
}

#[cfg(test)]
mod tests {
    use super::ng_time;
    use std::time::Duration;

    #[test]
    fn pcapng_resolutions() {
        assert_eq!(ng_time(1_500_000, 1_000_000, 0), Duration::from_millis(1500));
        assert_eq!(ng_time(3_000_000_001, 1_000_000_000, 0), Duration::new(3, 1));
        assert_eq!(ng_time(1024 + 512, 1024, 10), Duration::from_millis(11_500));
    }
}
