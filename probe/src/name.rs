//! Device-name sanitization: whatever bytes the driver writes
//! become a short, printable, path-free label.

use crate::generated::spec::MAX_DEVICE_NAME_CHARS;

/// The label used when nothing printable and path-free remains.
pub const UNKNOWN_DEVICE_NAME: &str = "unknown";

/// Cut at the first NUL, decode lossily as UTF-8, drop control characters,
/// keep at most `MAX_DEVICE_NAME_CHARS` characters, trim; an empty result or
/// one that looks like an absolute path becomes `unknown`.
pub fn sanitize_device_name(buffer: &[u8]) -> String {
    let until_nul = buffer.split(|byte| *byte == 0).next().unwrap_or(&[]);
    let decoded = String::from_utf8_lossy(until_nul);
    let printable: String = decoded
        .chars()
        .filter(|character| !character.is_control())
        .take(MAX_DEVICE_NAME_CHARS)
        .collect();
    let trimmed = printable.trim();
    if trimmed.is_empty() || looks_like_absolute_path(trimmed) {
        UNKNOWN_DEVICE_NAME.to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// A leading `/` or `\` (POSIX, UNC or rooted Windows path), or a drive
/// letter followed by `:` and a separator: the report schema refuses both,
/// so such a name would make the whole report invalid.
fn looks_like_absolute_path(name: &str) -> bool {
    let bytes = name.as_bytes();
    match bytes {
        [b'/' | b'\\', ..] => true,
        [drive, b':', b'/' | b'\\', ..] => drive.is_ascii_alphabetic(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_an_ordinary_name() {
        assert_eq!(
            sanitize_device_name(b"NVIDIA H100 80GB HBM3\0junk"),
            "NVIDIA H100 80GB HBM3"
        );
    }

    #[test]
    fn cuts_at_the_first_nul_and_handles_no_nul() {
        assert_eq!(sanitize_device_name(b"A\0B"), "A");
        assert_eq!(sanitize_device_name(b"no terminator"), "no terminator");
        assert_eq!(sanitize_device_name(b""), UNKNOWN_DEVICE_NAME);
        assert_eq!(sanitize_device_name(b"\0"), UNKNOWN_DEVICE_NAME);
    }

    #[test]
    fn removes_control_characters_and_trims() {
        assert_eq!(
            sanitize_device_name(b"  GPU\x1b[31m\tred\x7f\n "),
            "GPU[31mred"
        );
        assert_eq!(sanitize_device_name("x\u{85}y".as_bytes()), "xy");
        assert_eq!(sanitize_device_name(b"\x01\x02 \x03"), UNKNOWN_DEVICE_NAME);
    }

    #[test]
    fn decodes_invalid_utf8_lossily() {
        assert_eq!(
            sanitize_device_name(b"GPU \xff\xfe"),
            "GPU \u{fffd}\u{fffd}"
        );
    }

    #[test]
    fn limits_the_length_in_characters() {
        let long = "é".repeat(300);
        let sanitized = sanitize_device_name(long.as_bytes());
        assert_eq!(sanitized.chars().count(), MAX_DEVICE_NAME_CHARS);
    }

    #[test]
    fn trims_after_truncating() {
        let mut name = "a".repeat(MAX_DEVICE_NAME_CHARS - 1);
        name.push_str("     tail");
        assert_eq!(
            sanitize_device_name(name.as_bytes()),
            "a".repeat(MAX_DEVICE_NAME_CHARS - 1)
        );
    }

    #[test]
    fn refuses_names_that_look_like_paths() {
        assert_eq!(sanitize_device_name(b"/dev/nvidia0"), UNKNOWN_DEVICE_NAME);
        assert_eq!(sanitize_device_name(b"  /etc/passwd"), UNKNOWN_DEVICE_NAME);
        assert_eq!(sanitize_device_name(b"\x01/etc"), UNKNOWN_DEVICE_NAME);
        assert_eq!(
            sanitize_device_name(b"\\\\server\\share"),
            UNKNOWN_DEVICE_NAME
        );
        assert_eq!(sanitize_device_name(b"C:\\Windows"), UNKNOWN_DEVICE_NAME);
        assert_eq!(sanitize_device_name(b"c:/x"), UNKNOWN_DEVICE_NAME);
        assert_eq!(sanitize_device_name(b"Tesla V100/SXM2"), "Tesla V100/SXM2");
        assert_eq!(sanitize_device_name(b"A:"), "A:");
    }
}
