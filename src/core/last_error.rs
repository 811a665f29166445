//! The calling thread's last error message: set by a failing C call, read
//! by `syrah_last_error_message` and carried by host tasks' failures.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Makes `msg` this thread's last error message (NULs become spaces).
pub fn set(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Forgets this thread's last error message.
pub fn clear() {
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::default());
}

/// `": <message>"` when this thread's last call failed with a message.
pub fn suffix() -> String {
    LAST_ERROR.with(|e| {
        let m = e.borrow();
        if m.as_bytes().is_empty() {
            String::new()
        } else {
            format!(": {}", m.to_string_lossy())
        }
    })
}

/// The message as a C string, valid until this thread's next `set`.
pub fn as_ptr() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_and_suffix() {
        clear();
        assert_eq!(suffix(), "");
        set("bad\0value");
        assert_eq!(suffix(), ": bad value");
        clear();
        assert_eq!(suffix(), "");
    }
}
