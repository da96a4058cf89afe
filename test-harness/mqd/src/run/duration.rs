//! Durations as people write them on a command line: `90s`, `5m`, `1h30m`, `250ms`, or a
//! bare number of seconds.

use std::time::Duration;

/// Longest duration accepted: a week (a batch job's limit is shorter).
const LONGEST: Duration = Duration::from_secs(7 * 24 * 3600);

/// `text` as a duration, or what is wrong with it.
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration: write it as 90s, 5m, 1h30m, 250ms or a number of seconds"
        )
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(bad());
    }
    if let Ok(seconds) = trimmed.parse::<f64>() {
        return within(
            Duration::try_from_secs_f64(seconds).map_err(|_| bad())?,
            text,
        );
    }
    let mut total = Duration::ZERO;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" | "sec" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += Duration::try_from_secs_f64(value * unit).map_err(|_| bad())?;
    }
    within(total, text)
}

fn within(d: Duration, text: &str) -> Result<Duration, String> {
    if d.is_zero() {
        return Err(format!("{text:?} is no time: give a positive duration"));
    }
    if d > LONGEST {
        return Err(format!("{text:?} is longer than a week"));
    }
    Ok(d)
}

/// `d` as people read it: `90 s`, `5 min`, `1 h 30 min`, `250 ms`.
pub fn words(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return match ms {
            // A read of a few records: its microseconds say what it cost.
            0 => format!("{} µs", d.as_micros()),
            _ => format!("{ms} ms"),
        };
    }
    let s = d.as_secs_f64();
    if s < 120.0 {
        let rounded = (s * 10.0).round() / 10.0;
        return if rounded.fract() == 0.0 {
            format!("{} s", rounded as u64)
        } else {
            format!("{rounded:.1} s")
        };
    }
    let minutes = d.as_secs() / 60;
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usual_forms_are_read() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse("1.5min"), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn bad_forms_say_how_to_write_one() {
        for bad in ["", "5 x", "m5", "-3", "5y", "1h-2m", "nan"] {
            let err = parse(bad).unwrap_err();
            assert!(
                err.contains("duration") || err.contains("no time"),
                "{bad}: {err}"
            );
        }
        assert!(parse("0s").unwrap_err().contains("positive"));
        assert!(parse("30d").unwrap_err().contains("week"));
    }

    #[test]
    fn words_read_back() {
        assert_eq!(words(Duration::from_millis(250)), "250 ms");
        assert_eq!(words(Duration::from_micros(180)), "180 µs");
        assert_eq!(words(Duration::from_secs(90)), "90 s");
        assert_eq!(words(Duration::from_secs(300)), "5 min");
        assert_eq!(words(Duration::from_secs(5400)), "1 h 30 min");
    }
}
