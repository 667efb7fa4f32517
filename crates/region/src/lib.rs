//! Managed memory regions (issue 3).
#![forbid(unsafe_code)]
