//! Retry policy for provider requests: `min(base·2^(attempt−1), max) × U(0.8, 1.2)`,
//! `Retry-After` honoured, never after cancel, never on 4xx other than 408/409/429.

use std::time::Duration;

use super::types::LlmError;

/// The longest `Retry-After` we wait out; a server asking for more is answered with the error
/// (a turn should not hang for minutes on one request). Not user-tunable.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Total attempts, the first included.
    pub max_attempts: u32,
    pub base: Duration,
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(200),
            max: Duration::from_millis(5000),
        }
    }
}

impl RetryPolicy {
    /// The delay before attempt `attempt + 1`, after failed attempt `attempt` (1-based),
    /// or `None` when the error must not be retried or attempts are used up. `jitter` is a
    /// uniform sample in [0, 1).
    pub fn delay(&self, attempt: u32, err: &LlmError, jitter: f64) -> Option<Duration> {
        if attempt >= self.max_attempts || !err.retryable() {
            return None;
        }
        if let Some(ra) = err.retry_after() {
            return (ra <= RETRY_AFTER_CAP).then_some(ra);
        }
        Some(self.backoff(attempt, jitter))
    }

    /// `min(base·2^(attempt−1), max) × (0.8 + 0.4·jitter)`.
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let raw = self.base.saturating_mul(1u32 << exp).min(self.max);
        raw.mul_f64(0.8 + 0.4 * jitter.clamp(0.0, 1.0))
    }
}

/// A uniform sample in [0, 1) without a `rand` dependency: the std hasher's random keys
/// mixed with a counter (jitter only needs to de-synchronise clients, not be secure).
pub fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Parses `Retry-After`: delta-seconds (fractions accepted) or an HTTP date.
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    http_date_delay(v)
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` → time from now (zero when in the past).
fn http_date_delay(v: &str) -> Option<Duration> {
    let parts: Vec<&str> = v.split_whitespace().collect();
    if parts.len() != 6 || parts[5] != "GMT" {
        return None;
    }
    let day: i64 = parts[1].parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])? as i64
        + 1;
    let year: i64 = parts[3].parse().ok()?;
    let hms: Vec<i64> = parts[4]
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if hms.len() != 3 {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let at = days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs() as i64;
    Some(Duration::from_secs(at.saturating_sub(now).max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> LlmError {
        LlmError::Http {
            status,
            body: String::new(),
            retry_after: None,
        }
    }

    #[test]
    fn backoff_formula_with_jitter_bounds() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, 0.5), Duration::from_millis(200));
        assert_eq!(p.backoff(2, 0.5), Duration::from_millis(400));
        assert_eq!(p.backoff(1, 0.0), Duration::from_millis(160));
        assert_eq!(p.backoff(1, 1.0), Duration::from_millis(240));
        assert_eq!(
            p.backoff(10, 0.5),
            Duration::from_millis(5000),
            "capped at max"
        );
        assert_eq!(p.backoff(10, 1.0), Duration::from_millis(6000));
        for _ in 0..1000 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j));
        }
    }

    #[test]
    fn what_is_retried() {
        let p = RetryPolicy::default();
        for s in [408, 409, 429, 500, 502, 503] {
            assert!(p.delay(1, &http(s), 0.5).is_some(), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(p.delay(1, &http(s), 0.5).is_none(), "{s}");
        }
        assert!(p.delay(1, &LlmError::Cancelled, 0.5).is_none());
        assert!(
            p.delay(
                1,
                &LlmError::ContextOverflow {
                    message: "x".into()
                },
                0.5
            )
            .is_none()
        );
        assert!(p.delay(3, &http(500), 0.5).is_none(), "3 attempts in all");
        assert!(p.delay(2, &http(500), 0.5).is_some());
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let p = RetryPolicy::default();
        let e = LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(2)),
            body: String::new(),
        };
        assert_eq!(p.delay(1, &e, 0.0), Some(Duration::from_secs(2)));
        let e = LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(3600)),
            body: String::new(),
        };
        assert_eq!(p.delay(1, &e, 0.0), None);
    }

    #[test]
    fn retry_after_parsing() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
