//! Wall-clock times as people read them (UTC), without a date crate: a transcript line's
//! `atMs` shown as `2026-12-04` and `17:59:32.690`.

/// The UTC date (`YYYY-MM-DD`) and time (`HH:MM:SS.mmm`) of `ms` milliseconds since the epoch.
pub fn utc(ms: u64) -> (String, String) {
    let days = ms / 86_400_000;
    let of_day = ms % 86_400_000;
    let (year, month, day) = civil_from_days(days);
    (
        format!("{year:04}-{month:02}-{day:02}"),
        format!(
            "{:02}:{:02}:{:02}.{:03}",
            of_day / 3_600_000,
            of_day / 60_000 % 60,
            of_day / 1000 % 60,
            of_day % 1000
        ),
    )
}

/// Days since 1970-01-01 as a proleptic Gregorian date (H. Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn dates_and_times_read_as_utc() {
        assert_eq!(utc(0), ("1970-01-01".into(), "00:00:00.000".into()));
        // 2000-02-29 (a leap day of a century leap year) 12:34:56.789.
        assert_eq!(
            utc(951_827_696_789),
            ("2000-02-29".into(), "12:34:56.789".into())
        );
        assert_eq!(
            utc(1_796_407_972_690),
            ("2026-12-04".into(), "18:12:52.690".into())
        );
        assert_eq!(utc(1_709_251_199_999).0, "2024-02-29");
        assert_eq!(utc(4_102_444_800_000).0, "2100-01-01");
    }
}
