//! Random identifiers: `sess_<32 hex>` sessions and `<src>:fork:<12 hex>` fork records.

/// `n` random bytes from the kernel (`getrandom(2)`), hex-encoded.
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let got = unsafe {
            libc::getrandom(
                buf[filled..].as_mut_ptr().cast::<libc::c_void>(),
                n - filled,
                0,
            )
        };
        match usize::try_from(got) {
            Ok(k) if k > 0 => filled += k,
            // EINTR and friends: retry; a kernel without getrandom falls back below.
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return fallback_hex(n),
        }
    }
    hex::encode(buf)
}

/// Without getrandom (pre-3.17 kernels): `/dev/urandom`, and as a last resort a hash of
/// the clock and pid, which is unique enough for ids (they are not secrets).
fn fallback_hex(n: usize) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok()
    {
        return hex::encode(buf);
    }
    use sha2::Digest;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut out = String::new();
    let mut counter = 0u64;
    while out.len() < n * 2 {
        let d = sha2::Sha256::digest(format!("{nanos}:{}:{counter}", std::process::id()));
        out.push_str(&hex::encode(d));
        counter += 1;
    }
    out.truncate(n * 2);
    out
}

pub fn session_id() -> String {
    format!("sess_{}", random_hex(16))
}

pub fn fork_record_id(source: &str) -> String {
    format!("{source}:fork:{}", random_hex(6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let s = session_id();
        assert_eq!(s.len(), 5 + 32);
        assert!(s[5..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(session_id(), s);
        let f = fork_record_id("chat_1");
        assert!(f.starts_with("chat_1:fork:"));
        assert_eq!(f.len(), "chat_1:fork:".len() + 12);
    }
}
