//! Lowercase hex, the one encoding of digests and random ids in clawbridge's files and names.

use std::fmt::Write as _;

/// `bytes` as lowercase hex, two digits a byte.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// `count` bytes from the operating system's random source, as hex.
pub fn random(count: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; count];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(encode(&bytes))
}

/// The SHA-256 of `bytes` as hex, cut to its first `bytes_kept` bytes (32 for all of it).
pub fn sha256(bytes: &[u8], bytes_kept: usize) -> String {
    let digest = <sha2::Sha256 as sha2::Digest>::digest(bytes);
    encode(&digest[..bytes_kept.min(digest.len())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_and_two_digits_a_byte() {
        assert_eq!(encode(&[0, 15, 16, 255]), "000f10ff");
        assert_eq!(random(16).expect("random").len(), 32);
        assert_eq!(
            sha256(b"abc", 32),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(sha256(b"abc", 4), "ba7816bf");
    }
}
