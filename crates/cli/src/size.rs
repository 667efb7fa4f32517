//! Sizes on the command line: `4096`, `64K`, `64KiB`, `2M`, `1G` (binary units; a `B` or
//! `iB` suffix is allowed), and folio sizes, which must be a power of two from 4 KiB to 2 MiB.

use zswap::PAGE_SIZE;

/// A size on the command line that does not parse, or is out of range; the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not a number with an optional suffix.
    #[error("bad size '{0}': expected a number with an optional K, M, G or T suffix")]
    NotASize(String),
    /// More bytes than a u64 holds.
    #[error("bad size '{0}': too large")]
    TooLarge(String),
    /// A folio size that is not a power of two from 4 KiB to 2 MiB.
    #[error("bad folio size '{0}': must be a power of two from 4K to 2M")]
    FolioSize(String),
}

/// Parse a byte size with an optional K/M/G/T suffix (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (digits, shift) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 10),
        Some('M') => (&body[..body.len() - 1], 20),
        Some('G') => (&body[..body.len() - 1], 30),
        Some('T') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let Ok(n) = digits.trim().parse::<u64>() else {
        return Err(SizeError::NotASize(text.to_string()));
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| SizeError::TooLarge(text.to_string()))
}

/// `bytes` as the command line takes it: in the largest of T, G, M, K that divides it (so
/// that a size echoes in the unit it was given), else in bytes.
pub fn fmt_size(bytes: u64) -> String {
    for (suffix, shift) in [('T', 40), ('G', 30), ('M', 20), ('K', 10)] {
        if bytes != 0 && bytes.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// `bytes` with its unit, in the largest of TiB, GiB, MiB, KiB that divides it: "2 MiB".
pub fn fmt_unit(bytes: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes != 0 && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// `bytes` in MiB, rounded up to a whole MiB, as the command line takes it: for a least
/// value to give.
pub fn fmt_mib_up(bytes: u64) -> String {
    format!("{}M", bytes.div_ceil(1 << 20))
}

/// `bytes` for a person to read: GiB with one decimal from 1 GiB, else whole MiB.
pub fn fmt_human(bytes: u64) -> String {
    match bytes >= 1 << 30 {
        true => format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64),
        false => format!("{} MiB", bytes >> 20),
    }
}

/// Parse a folio size: a power of two from 4 KiB to 2 MiB.
pub fn parse_folio_size(text: &str) -> Result<usize, SizeError> {
    let v = parse_size(text)?;
    if !(PAGE_SIZE as u64..=2 << 20).contains(&v) || !v.is_power_of_two() {
        return Err(SizeError::FolioSize(text.to_string()));
    }
    Ok(v as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("64kib").unwrap(), 65536);
        assert_eq!(parse_size("2M").unwrap(), 2 << 20);
        assert_eq!(parse_size("1GB").unwrap(), 1 << 30);
        assert!(parse_size("").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn sizes_print_in_the_unit_they_were_given() {
        for text in ["100T", "64G", "1M", "1536K", "4097"] {
            assert_eq!(fmt_size(parse_size(text).unwrap()), text);
        }
        assert_eq!(fmt_size(1 << 30), "1G");
        assert_eq!(fmt_mib_up((56 << 20) + 1), "57M");
        assert_eq!(fmt_unit(2 << 20), "2 MiB");
        assert_eq!(fmt_unit(64 << 10), "64 KiB");
    }

    #[test]
    fn folio_sizes_are_powers_of_two_from_4k_to_2m() {
        assert_eq!(parse_folio_size("4K").unwrap(), PAGE_SIZE);
        assert_eq!(parse_folio_size("2M").unwrap(), 2 << 20);
        for bad in ["2K", "4M", "48K", "0", "x"] {
            assert!(parse_folio_size(bad).is_err(), "{bad}");
        }
    }
}
