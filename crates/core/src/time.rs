//! Calendar form of Unix-millisecond timestamps (UTC), without a clock.

/// `(year, month, day, hour, minute, second, millisecond)` in UTC.
fn civil(ts_ms: u64) -> (i64, u32, u32, u64, u64, u64, u64) {
    let (days, ms_of_day) = ((ts_ms / 86_400_000) as i64, ts_ms % 86_400_000);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        month,
        day,
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    )
}

/// RFC 3339 / ISO 8601, e.g. `2026-11-22T05:31:28.123Z`.
///
/// ```
/// assert_eq!(weir_core::iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
/// ```
pub fn iso8601(ts_ms: u64) -> String {
    let (y, mo, d, h, mi, s, ms) = civil(ts_ms);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// For people: `2026-11-22 05:31:28.123` (UTC).
pub fn utc_display(ts_ms: u64) -> String {
    let (y, mo, d, h, mi, s, ms) = civil(ts_ms);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{ms:03}")
}

/// A duration for people: `950ms`, `30s`, `1.5s`, `2m03s`, `1h02m`.
///
/// ```
/// assert_eq!(weir_core::human_duration(30_000), "30s");
/// assert_eq!(weir_core::human_duration(1_500), "1.5s");
/// assert_eq!(weir_core::human_duration(123_000), "2m03s");
/// ```
pub fn human_duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 if ms.is_multiple_of(1000) => format!("{}s", ms / 1000),
        1_000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(utc_display(0), "1970-01-01 00:00:00.000");
        assert_eq!(iso8601(1_795_325_488_123), "2026-11-22T05:31:28.123Z");
        assert_eq!(utc_display(4_107_542_399_999), "2100-02-28 23:59:59.999");
    }
}
