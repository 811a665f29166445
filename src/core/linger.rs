//! How long runtime threads keep asking for work, or for the end of what
//! they wait on, before they sleep or leave the wait to the driver.

/// The default, in microseconds: on an H100 host a thread woken from sleep
/// started 25-40 µs late, and 50-100 µs covered the gap between one copy's
/// end and the next copy in a loop.
pub const DEFAULT_US: u64 = 100;

/// The most that may be set: beyond it spinning threads would cost more
/// than any wake.
pub const MAX_US: u64 = 10_000;

/// The linger time from the `SYRAH_LINGER_US` setting (microseconds,
/// 0 to `MAX_US`; 0 sleeps at once). An unusable setting keeps the default
/// and is reported in the second field.
pub fn from_setting(setting: Option<&str>) -> (u64, Option<String>) {
    match setting.map(str::trim) {
        None | Some("") => (DEFAULT_US, None),
        Some(v) => match v.parse::<u64>() {
            Ok(us) if us <= MAX_US => (us, None),
            _ => (
                DEFAULT_US,
                Some(format!(
                    "SYRAH_LINGER_US={v:?} is not a number of microseconds from 0 to {MAX_US}: \
                     using the default ({DEFAULT_US})"
                )),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_overrides_the_default_and_names_a_bad_value() {
        assert_eq!(from_setting(None), (100, None));
        assert_eq!(from_setting(Some("")), (100, None));
        assert_eq!(from_setting(Some("0")), (0, None));
        assert_eq!(from_setting(Some(" 250 ")), (250, None));
        assert_eq!(from_setting(Some("10000")), (10_000, None));
        assert_eq!(
            from_setting(Some("10001")),
            (
                100,
                Some(
                    "SYRAH_LINGER_US=\"10001\" is not a number of microseconds from 0 to 10000: \
                     using the default (100)"
                        .to_string()
                )
            )
        );
        let (us, msg) = from_setting(Some("-5"));
        assert_eq!(us, 100);
        assert!(msg.is_some_and(|m| m.starts_with("SYRAH_LINGER_US=\"-5\" ")));
        assert_eq!(from_setting(Some("fast")).0, 100);
    }
}
