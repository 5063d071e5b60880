//! `strftime_now(fmt)`, the clock global transformers gives chat templates (Llama 3.x prints
//! today's date with it).
//!
//! Implemented over `SystemTime` in UTC with the common C format codes, rather than pulling a date
//! crate for one global. transformers uses local time; training machines run in UTC, and a date
//! in a system prompt is rendered into the prompt once per episode, so it cannot drift mid-episode.
use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A broken-down UTC time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    weekday: u32,
    yday: u32,
}

impl Civil {
    pub(crate) fn from_unix(secs: i64) -> Civil {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Days-to-civil conversion (proleptic Gregorian, era-based).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let cumulative = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
        let month_idx = usize::try_from(month - 1).unwrap_or(0);
        let yday = cumulative[month_idx] + day + i64::from(leap && month > 2);
        Civil {
            year,
            month: month as u32,
            day: day as u32,
            hour: (rem / 3600) as u32,
            minute: (rem % 3600 / 60) as u32,
            second: (rem % 60) as u32,
            weekday: (days + 4).rem_euclid(7) as u32,
            yday: yday as u32,
        }
    }

    /// Format with C `strftime` codes; unknown codes are copied through unchanged.
    pub(crate) fn format(&self, fmt: &str) -> String {
        let month_name = MONTHS[(self.month as usize).saturating_sub(1) % 12];
        let weekday_name = WEEKDAYS[self.weekday as usize % 7];
        let hour12 = match self.hour % 12 {
            0 => 12,
            h => h,
        };
        let mut out = String::with_capacity(fmt.len() + 16);
        let mut chars = fmt.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('Y') => out.push_str(&self.year.to_string()),
                Some('y') => out.push_str(&format!("{:02}", self.year.rem_euclid(100))),
                Some('m') => out.push_str(&format!("{:02}", self.month)),
                Some('d') => out.push_str(&format!("{:02}", self.day)),
                Some('e') => out.push_str(&format!("{:>2}", self.day)),
                Some('H') => out.push_str(&format!("{:02}", self.hour)),
                Some('I') => out.push_str(&format!("{hour12:02}")),
                Some('M') => out.push_str(&format!("{:02}", self.minute)),
                Some('S') => out.push_str(&format!("{:02}", self.second)),
                Some('j') => out.push_str(&format!("{:03}", self.yday)),
                Some('p') => out.push_str(if self.hour < 12 { "AM" } else { "PM" }),
                Some('B') => out.push_str(month_name),
                Some('b') | Some('h') => out.push_str(&month_name[..3]),
                Some('A') => out.push_str(weekday_name),
                Some('a') => out.push_str(&weekday_name[..3]),
                Some('w') => out.push_str(&self.weekday.to_string()),
                Some('F') => {
                    out.push_str(&format!("{}-{:02}-{:02}", self.year, self.month, self.day))
                }
                Some('T') => out.push_str(&format!(
                    "{:02}:{:02}:{:02}",
                    self.hour, self.minute, self.second
                )),
                Some('Z') => out.push_str("UTC"),
                Some('z') => out.push_str("+0000"),
                Some('%') => out.push('%'),
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
                None => out.push('%'),
            }
        }
        out
    }
}

/// The `strftime_now(format)` template global.
pub(crate) fn strftime_now(fmt: String) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(0))
        .unwrap_or(0);
    Civil::from_unix(secs).format(&fmt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        // 2024-02-29 13:05:09 UTC, a Thursday, day 60.
        let c = Civil::from_unix(1_709_211_909);
        assert_eq!(
            c.format("%Y-%m-%d %H:%M:%S %a %j"),
            "2024-02-29 13:05:09 Thu 060"
        );
        assert_eq!(c.format("%d %b %Y"), "29 Feb 2024");
        assert_eq!(c.format("%B %I%p 100%%"), "February 01PM 100%");
        assert_eq!(Civil::from_unix(0).format("%A %F"), "Thursday 1970-01-01");
        assert_eq!(
            Civil::from_unix(1_735_689_599).format("%F %T %j"),
            "2024-12-31 23:59:59 366"
        );
    }
}
