//! What a call returns and why it failed: the status codes, the thread's last error message,
//! and `call`, which runs a function's body so that neither an error nor a panic crosses
//! into C as anything but a status.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use region::RegionError;
use zswap::params::ParamError;

/// What a function returns: `UZSWAP_OK`, or a negative code for what kind of failure it was.
/// On a failure, `uzswap_last_error()` says what failed.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum uzswap_status {
    /// Success.
    UZSWAP_OK = 0,
    /// An argument was NULL, out of range or unknown: a configuration field, a tunable's name
    /// or value, a statistic's name.
    UZSWAP_ERR_INVALID = -1,
    /// Out of memory or of another resource: mapping the region or its staging area, starting
    /// its threads.
    UZSWAP_ERR_NOMEM = -2,
    /// The swap file could not be created or used.
    UZSWAP_ERR_IO = -3,
    /// userfaultfd is not available (a kernel without it, a seccomp filter) or not permitted.
    UZSWAP_ERR_USERFAULTFD = -4,
    /// A bug in uzswap: a panic, caught before it reached the caller. The message says where.
    UZSWAP_ERR_INTERNAL = -5,
}

use uzswap_status::*;

/// A failed call: its status and its message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub status: uzswap_status,
    pub message: String,
}

impl Failure {
    /// An invalid argument.
    pub fn invalid(message: impl Into<String>) -> Self {
        Failure {
            status: UZSWAP_ERR_INVALID,
            message: message.into(),
        }
    }

    /// A NULL pointer where `what` was needed.
    pub fn null(what: &str) -> Self {
        Failure::invalid(format!("{what} is NULL"))
    }
}

impl From<RegionError> for Failure {
    fn from(e: RegionError) -> Self {
        let status = match &e {
            RegionError::Config(_) => UZSWAP_ERR_INVALID,
            RegionError::Uffd(_) => UZSWAP_ERR_USERFAULTFD,
            RegionError::Map(_) | RegionError::Spawn(_) => UZSWAP_ERR_NOMEM,
            RegionError::SwapFile(_) => UZSWAP_ERR_IO,
        };
        Failure {
            status,
            message: e.chain(),
        }
    }
}

impl From<ParamError> for Failure {
    fn from(e: ParamError) -> Self {
        Failure::invalid(e.to_string())
    }
}

thread_local! {
    /// The message of the last call that failed on this thread.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Record `message` as this thread's last error. A NUL inside it (from a path) would cut the
/// C string short: it becomes a space.
fn set_last_error(message: &str) {
    let message = CString::new(message.replace('\0', " ")).expect("NULs replaced");
    // During the thread's exit the slot may be gone: there is nobody left to read it.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = message);
}

/// Run `body`, the work of the C function `name`, and return its status: `UZSWAP_OK`, or the
/// failure's code with `name: message` as this thread's last error. A panic in `body` becomes
/// `UZSWAP_ERR_INTERNAL`: unwinding into C would abort the process.
pub(crate) fn call(name: &str, body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    // AssertUnwindSafe: after a panic the caller only gets a status; the region's state is
    // shared with its threads under locks that do not poison, as it is for any Rust user.
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return UZSWAP_OK as c_int,
        Ok(Err(failure)) => failure,
        Err(payload) => Failure {
            status: UZSWAP_ERR_INTERNAL,
            message: format!(
                "internal error (a bug in uzswap): {}",
                panic_message(payload.as_ref())
            ),
        },
    };
    set_last_error(&format!("{name}: {}", failure.message));
    failure.status as c_int
}

/// The text a panic was raised with.
fn panic_message(payload: &(dyn Any + Send)) -> &str {
    match payload.downcast_ref::<&str>() {
        Some(s) => s,
        None => payload
            .downcast_ref::<String>()
            .map_or("(no message)", String::as_str),
    }
}

/// The message of the last call that failed on the calling thread, as one line:
/// `function: what failed`; "" when none has. The string belongs to uzswap: it stays valid
/// and unchanged until another call fails on this thread, or the thread exits. A successful
/// call leaves it as it was, so read it only right after a call returned an error.
#[no_mangle]
pub extern "C" fn uzswap_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|last| last.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}
