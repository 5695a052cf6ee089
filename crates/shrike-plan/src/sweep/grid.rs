//! Grids as users write them: `1,4,16:256:16,512` is 1, 4, 16 to 256 in steps of 16, and 512.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("grid {given:?}: {reason}")]
pub struct GridError {
    pub given: String,
    pub reason: String,
}

/// The points of `s`, ascending, each once. Points are at least 1.
pub fn parse(s: &str) -> Result<Vec<u64>, GridError> {
    let err = |reason: &str| GridError { given: s.to_string(), reason: reason.to_string() };
    let num = |x: &str| -> Result<u64, GridError> {
        x.trim().parse::<u64>().map_err(|_| err(&format!("{x:?} is not a whole number")))
    };
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(err("an empty entry (expected N, or FROM:TO:STEP)"));
        }
        let bits: Vec<&str> = part.split(':').collect();
        match bits.as_slice() {
            [n] => out.push(num(n)?),
            [from, to, step] => {
                let (from, to, step) = (num(from)?, num(to)?, num(step)?);
                if step == 0 || from > to {
                    return Err(err(&format!(
                        "{part:?}: a range FROM:TO:STEP needs FROM ≤ TO and STEP ≥ 1"
                    )));
                }
                if (to - from) / step > 10_000 {
                    return Err(err(&format!("{part:?} has more than 10000 points")));
                }
                out.extend((from..=to).step_by(step as usize));
            }
            _ => return Err(err(&format!("{part:?}: expected N or FROM:TO:STEP"))),
        }
    }
    if out.contains(&0) {
        return Err(err("points must be at least 1"));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse("1,4,16:64:16,512").unwrap(), [1, 4, 16, 32, 48, 64, 512]);
        assert_eq!(parse(" 8 , 2,2 ").unwrap(), [2, 8]);
        assert_eq!(parse("10:25:10").unwrap(), [10, 20]);
        for (bad, why) in [
            ("", "empty entry"),
            ("1,,2", "empty entry"),
            ("a", "not a whole number"),
            ("0,1", "at least 1"),
            ("5:1:1", "FROM ≤ TO"),
            ("1:5:0", "STEP ≥ 1"),
            ("1:2", "FROM:TO:STEP"),
            ("1:100000:1", "more than 10000"),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
