//! Sizes on the command line: `4096`, `64K`, `64KiB`, `2M`, `1G` (binary units; a `B` or
//! `iB` suffix is allowed), and folio sizes, which must be a power of two from 4 KiB to 2 MiB.

use anyhow::{bail, Result};

/// Parse a byte size with an optional K/M/G/T suffix (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64> {
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
        bail!("bad size '{text}': expected a number with an optional K, M, G or T suffix");
    };
    match n.checked_mul(1u64 << shift) {
        Some(v) => Ok(v),
        None => bail!("bad size '{text}': too large"),
    }
}

/// Parse a folio size: a power of two from 4 KiB to 2 MiB.
pub fn parse_folio_size(text: &str) -> Result<usize> {
    let v = parse_size(text)?;
    if !(4096..=2 << 20).contains(&v) || !v.is_power_of_two() {
        bail!("bad folio size '{text}': must be a power of two from 4K to 2M");
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
    fn folio_sizes_are_powers_of_two_from_4k_to_2m() {
        assert_eq!(parse_folio_size("4K").unwrap(), 4096);
        assert_eq!(parse_folio_size("2M").unwrap(), 2 << 20);
        for bad in ["2K", "4M", "48K", "0", "x"] {
            assert!(parse_folio_size(bad).is_err(), "{bad}");
        }
    }
}
