//! Strings uzswap hands to C: allocated here, freed only by `uzswap_string_free`.

use std::ffi::{c_char, CString};

/// `text` as a C string the caller frees with `uzswap_string_free`.
pub(crate) fn to_c(text: String) -> *mut c_char {
    CString::new(text)
        .expect("statistics and tunable values hold no NUL byte")
        .into_raw()
}

/// Free a string that uzswap returned (statistics, a tunable's value). NULL is ignored.
///
/// # Safety
///
/// `s` is NULL or a string a uzswap function returned and that was not freed yet.
#[no_mangle]
pub unsafe extern "C" fn uzswap_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: `s` came from `CString::into_raw` in `to_c` and is freed once (the caller's
        // promise): ownership goes back to the CString, which frees it.
        drop(unsafe { CString::from_raw(s) });
    }
}
