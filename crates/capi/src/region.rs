//! `struct uzswap_region` and the functions on it: create, its memory, its statistics, the
//! engine's tunables, destroy.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use region::Region;

use crate::config::{c_str, region_config, uzswap_config};
use crate::error::{call, Failure};
use crate::stats::Snapshot;
use crate::strings::to_c;

/// A region: `uzswap_region_len()` bytes of memory at `uzswap_region_ptr()`, which any thread
/// may read and write like ordinary memory, held under the configuration's memory limit.
/// Made by `uzswap_region_create`, freed by `uzswap_region_destroy`. Every other function may
/// be called on it from any number of threads at once.
pub struct uzswap_region {
    region: Region,
}

// The functions below share a region between whatever threads call them: it must allow that.
const _: fn() = || {
    fn shared_between_threads<T: Send + Sync>() {}
    shared_between_threads::<Region>();
};

/// The region behind `region`.
///
/// # Safety
///
/// `region` is NULL or a region `uzswap_region_create` made and that was not destroyed.
unsafe fn region_ref<'a>(region: *const uzswap_region) -> Result<&'a Region, Failure> {
    // SAFETY: not NULL here, so a live region (the caller's promise); `Region` is Sync (the
    // assertion above), so a shared reference is sound whichever threads hold one.
    match unsafe { region.as_ref() } {
        Some(r) => Ok(&r.region),
        None => Err(Failure::null("region")),
    }
}

/// A string argument, as UTF-8.
///
/// # Safety
///
/// `s` is NULL or a NUL-terminated string that outlives `'a`.
unsafe fn str_arg<'a>(s: *const c_char, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: the caller's promise.
    let s: &CStr = unsafe { c_str(s) }.ok_or_else(|| Failure::null(what))?;
    s.to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// Store `value` through the out-pointer `out`.
///
/// # Safety
///
/// `out` is NULL or valid for a write of a `T`.
unsafe fn put<T>(
    out: *mut T,
    what: &str,
    value: impl FnOnce() -> Result<T, Failure>,
) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::null(what));
    }
    let value = value()?;
    // SAFETY: not NULL, so valid for a write (the caller's promise).
    unsafe { out.write(value) };
    Ok(())
}

/// Make a region of `size` bytes (rounded up to whole folios) under `*config`, and store it in
/// `*out`. Returns `UZSWAP_OK`; or, with `*out` set to NULL, `UZSWAP_ERR_INVALID` for a
/// configuration the region cannot honour (the message names the field),
/// `UZSWAP_ERR_USERFAULTFD`, `UZSWAP_ERR_NOMEM` or `UZSWAP_ERR_IO` (the swap file). A failure
/// leaves nothing behind: no thread, no mapping, no file.
///
/// Without root, `CAP_SYS_PTRACE` or access to /dev/userfaultfd, the region is served in
/// user-mode-only mode (see `user_mode_only`).
///
/// # Safety
///
/// `config` is NULL or a `struct uzswap_config` filled by `uzswap_config_init` (its strings
/// NULL or NUL-terminated); `out` is NULL or valid for a write of a pointer.
#[no_mangle]
pub unsafe extern "C" fn uzswap_region_create(
    size: usize,
    config: *const uzswap_config,
    out: *mut *mut uzswap_region,
) -> c_int {
    call("uzswap_region_create", || {
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        // SAFETY: not NULL, so valid for a write (the caller's promise). NULL until a region
        // is made, so a failed call leaves no stale pointer.
        unsafe { out.write(ptr::null_mut()) };
        // SAFETY: the caller's promise about `config`.
        let config = unsafe { region_config(config) }?;
        let region = Region::new(size, config)?;
        let made = Box::into_raw(Box::new(uzswap_region { region }));
        // SAFETY: as above.
        unsafe { out.write(made) };
        Ok(())
    })
}

/// The first byte of the region's memory; NULL when `region` is NULL.
///
/// # Safety
///
/// `region` is NULL or a live region (made by `uzswap_region_create`, not destroyed).
#[no_mangle]
pub unsafe extern "C" fn uzswap_region_ptr(region: *const uzswap_region) -> *mut c_void {
    // SAFETY: the caller's promise.
    unsafe { region_ref(region) }.map_or(ptr::null_mut(), |r| r.as_ptr().cast())
}

/// The size of the region's memory in bytes: the size it was made with, rounded up to whole
/// folios; 0 when `region` is NULL.
///
/// # Safety
///
/// `region` is NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn uzswap_region_len(region: *const uzswap_region) -> usize {
    // SAFETY: the caller's promise.
    unsafe { region_ref(region) }.map_or(0, |r| r.len())
}

/// The region's statistics as `name value` lines, like /proc/vmstat, stored in `*text`: the
/// engine's with the kernel's names (`zswpout`, `zswpin`, `pool_total_size`, `stored_pages`,
/// `written_back_pages`, ..., `hugepages-64kB/stats/zswpout`), the region's (`faults`,
/// `folios_evicted`, `fault_latency_p99_ns`, ...), then where its memory is
/// (`region_resident_bytes`, `region_staged_bytes`, `region_pool_bytes`,
/// `region_metadata_bytes`, `memory_limit_bytes`). Free `*text` with `uzswap_string_free`.
///
/// # Safety
///
/// `region` is NULL or a live region; `text` is NULL or valid for a write of a pointer.
#[no_mangle]
pub unsafe extern "C" fn uzswap_region_stats_text(
    region: *const uzswap_region,
    text: *mut *mut c_char,
) -> c_int {
    call("uzswap_region_stats_text", || {
        // SAFETY: the caller's promises.
        let r = unsafe { region_ref(region) }?;
        // SAFETY: the caller's promise.
        unsafe { put(text, "text", || Ok(to_c(Snapshot::of(r).text()))) }
    })
}

/// The same statistics as `uzswap_region_stats_text`, as one JSON object of name to value,
/// stored in `*json`. Free it with `uzswap_string_free`.
///
/// # Safety
///
/// `region` is NULL or a live region; `json` is NULL or valid for a write of a pointer.
#[no_mangle]
pub unsafe extern "C" fn uzswap_region_stats_json(
    region: *const uzswap_region,
    json: *mut *mut c_char,
) -> c_int {
    call("uzswap_region_stats_json", || {
        // SAFETY: the caller's promise.
        let r = unsafe { region_ref(region) }?;
        // SAFETY: the caller's promise.
        unsafe { put(json, "json", || Ok(to_c(Snapshot::of(r).json()))) }
    })
}

/// One statistic of `uzswap_region_stats_text`, by name, stored in `*value`
/// (`pages_per_fault`, the one that is not a whole number, aside). `UZSWAP_ERR_INVALID` for a
/// name there is no statistic of.
///
/// # Safety
///
/// `region` is NULL or a live region; `name` is NULL or a NUL-terminated string; `value` is
/// NULL or valid for a write of a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn uzswap_region_stat(
    region: *const uzswap_region,
    name: *const c_char,
    value: *mut u64,
) -> c_int {
    call("uzswap_region_stat", || {
        // SAFETY: the caller's promises.
        let (r, name) = unsafe { (region_ref(region)?, str_arg(name, "name")?) };
        let get = || {
            Snapshot::of(r)
                .get(name)
                .ok_or_else(|| Failure::invalid(format!("no statistic is named '{name}'")))
        };
        // SAFETY: the caller's promise.
        unsafe { put(value, "value", get) }
    })
}

/// Set one of the engine's tunables while the region runs, by its kernel name and in its
/// sysfs spelling, as `echo VALUE > /sys/module/zswap/parameters/NAME` would: `enabled`
/// (Y/N), `compressor` (`lz4`, `zstd:3`, ...; pages keep the codec that stored them),
/// `max_pool_percent` and `accept_threshold_percent` (0 to 100), `shrinker_enabled` (Y/N),
/// `writethrough` (Y/N/auto), `compress_threads` (1 to 8), `writeback_compressor` (`same`
/// or a codec: what pages are re-encoded with as they go to segments).
/// `UZSWAP_ERR_INVALID` for an unknown name or a value the tunable does
/// not take (the message lists the names, or says what the value must be); the tunable is then
/// left as it was.
///
/// # Safety
///
/// `region` is NULL or a live region; `name` and `value` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn uzswap_region_set_param(
    region: *const uzswap_region,
    name: *const c_char,
    value: *const c_char,
) -> c_int {
    call("uzswap_region_set_param", || {
        // SAFETY: the caller's promises.
        let (r, name, value) = unsafe {
            (
                region_ref(region)?,
                str_arg(name, "name")?,
                str_arg(value, "value")?,
            )
        };
        Ok(r.zswap().set_param(name, value)?)
    })
}

/// One of the engine's tunables (the names `uzswap_region_set_param` takes), in its sysfs
/// spelling, stored in `*value`: "Y", "20", "lz4". Free it with `uzswap_string_free`.
///
/// # Safety
///
/// `region` is NULL or a live region; `name` is NULL or a NUL-terminated string; `value` is
/// NULL or valid for a write of a pointer.
#[no_mangle]
pub unsafe extern "C" fn uzswap_region_get_param(
    region: *const uzswap_region,
    name: *const c_char,
    value: *mut *mut c_char,
) -> c_int {
    call("uzswap_region_get_param", || {
        // SAFETY: the caller's promises.
        let (r, name) = unsafe { (region_ref(region)?, str_arg(name, "name")?) };
        let get = || Ok(to_c(r.zswap().params().get(name)?));
        // SAFETY: the caller's promise.
        unsafe { put(value, "value", get) }
    })
}

/// Destroy the region: stop its threads, free its memory, its pool and its swap file. The
/// memory must not be used after this, and no other call on the region may run at the same
/// time or come after. NULL is ignored.
///
/// # Safety
///
/// `region` is NULL or a live region, used by no other thread now or later.
#[no_mangle]
pub unsafe extern "C" fn uzswap_region_destroy(region: *mut uzswap_region) {
    if region.is_null() {
        return;
    }
    // SAFETY: `region` came from `Box::into_raw` in `uzswap_region_create` and is destroyed
    // once, with no other user (the caller's promise).
    let region = unsafe { Box::from_raw(region) };
    // A panic while tearing down (a bug) is caught and left in `uzswap_last_error`; what it
    // left undone stays undone (leaked).
    call("uzswap_region_destroy", || {
        drop(region);
        Ok(())
    });
}
