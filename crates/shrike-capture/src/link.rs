//! Link layers: what precedes the IP header in each link type a capture may use. Ethernet
//! (with VLAN tags), Linux cooked capture v1 and v2 (`tcpdump -i any`), BSD loopback (host or
//! network byte order), and raw IP.

/// The IP packet inside a frame of `linktype`, or why there is none.
pub fn ip_payload(linktype: i32, frame: &[u8]) -> Result<&[u8], Skip> {
    match linktype {
        // DLT_EN10MB
        1 => ethernet(frame),
        // DLT_NULL (host byte order) and DLT_LOOP (network byte order): a 4-byte family.
        0 | 108 => {
            let family = frame.get(..4).ok_or(Skip::Short)?;
            let le = u32::from_le_bytes([family[0], family[1], family[2], family[3]]);
            let be = u32::from_be_bytes([family[0], family[1], family[2], family[3]]);
            // AF_INET is 2 everywhere; AF_INET6 is 10, 24, 28 or 30 depending on the OS.
            let ip = |f: u32| matches!(f, 2 | 10 | 24 | 28 | 30);
            if ip(le) || ip(be) {
                Ok(&frame[4..])
            } else {
                Err(Skip::NotIp)
            }
        }
        // LINKTYPE_RAW, DLT_RAW (12 and 14 on some systems), LINKTYPE_IPV4, LINKTYPE_IPV6
        101 | 12 | 14 | 228 | 229 => Ok(frame),
        // LINKTYPE_LINUX_SLL: 16 bytes, the protocol in the last two.
        113 => {
            let h = frame.get(..16).ok_or(Skip::Short)?;
            by_ethertype(u16::from_be_bytes([h[14], h[15]]), &frame[16..])
        }
        // LINKTYPE_LINUX_SLL2: 20 bytes, the protocol in the first two.
        276 => {
            let h = frame.get(..20).ok_or(Skip::Short)?;
            by_ethertype(u16::from_be_bytes([h[0], h[1]]), &frame[20..])
        }
        other => Err(Skip::LinkType(other)),
    }
}

fn ethernet(frame: &[u8]) -> Result<&[u8], Skip> {
    let mut at = 12;
    loop {
        let t = frame.get(at..at + 2).ok_or(Skip::Short)?;
        let ethertype = u16::from_be_bytes([t[0], t[1]]);
        // 802.1Q and 802.1ad tags: skip the tag and read the next type.
        if matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) {
            at += 4;
            continue;
        }
        return by_ethertype(ethertype, frame.get(at + 2..).ok_or(Skip::Short)?);
    }
}

fn by_ethertype(ethertype: u16, rest: &[u8]) -> Result<&[u8], Skip> {
    match ethertype {
        0x0800 | 0x86dd => Ok(rest),
        _ => Err(Skip::NotIp),
    }
}

/// Why a frame carries no IP packet to import.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    Short,
    NotIp,
    LinkType(i32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_each_link_layer() {
        let ip = [0x45u8, 0, 0, 20];
        let mut eth = vec![0u8; 12];
        eth.extend([0x81, 0x00, 0, 1, 0x08, 0x00]);
        eth.extend(ip);
        assert_eq!(ip_payload(1, &eth), Ok(&ip[..]));
        let mut sll = vec![0u8; 14];
        sll.extend([0x08, 0x00]);
        sll.extend(ip);
        assert_eq!(ip_payload(113, &sll), Ok(&ip[..]));
        let mut sll2 = vec![0x86, 0xdd];
        sll2.extend([0u8; 18]);
        sll2.extend(ip);
        assert_eq!(ip_payload(276, &sll2), Ok(&ip[..]));
        let mut null = 2u32.to_le_bytes().to_vec();
        null.extend(ip);
        assert_eq!(ip_payload(0, &null), Ok(&ip[..]));
        assert_eq!(ip_payload(101, &ip), Ok(&ip[..]));
        assert_eq!(ip_payload(147, &ip), Err(Skip::LinkType(147)));
        assert_eq!(ip_payload(1, &[0; 5]), Err(Skip::Short));
    }
}
