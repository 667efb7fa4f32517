//! `struct uzswap_config`: a region's configuration as C sees it, its defaults, and its
//! conversion to a `RegionConfig` (which `Region::new` validates; nothing is checked twice).
//!
//! The struct starts with its own size, as the program was built with. The library reads only
//! the bytes within that size, so a program built against this header goes on working with a
//! later library whose struct has more fields: those keep their defaults. A program built
//! against a later header and run with this library may pass a larger struct: the bytes past
//! this library's fields must then be zero (`uzswap_config_init` zeroes them), as the kernel's
//! `copy_struct_from_user` requires, so that a setting this library cannot honour is refused
//! rather than ignored.
//!
//! Adding a field: at the end, and keep the struct free of padding (a test checks), so that
//! every earlier size ends on a field boundary.

use std::ffi::{c_char, c_int, CStr, OsStr};
use std::mem::size_of;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::ptr;

use region::RegionConfig;
use zswap::compress::CompressorSpec;

use crate::error::{call, Failure};

/// How a region is set up. Fill it with `uzswap_config_init`, then set `memory_limit` and
/// whatever else should differ from the defaults. The names are those of the Rust library's
/// `RegionConfig`, and the tunables among them the kernel's.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct uzswap_config {
    /// `sizeof(struct uzswap_config)` as the program was built with (`uzswap_config_init`
    /// sets it). Fields past it keep their defaults, so a program built against an older
    /// header works with a newer library.
    pub size: usize,
    /// Bytes the region may hold in memory: its resident pages, staged folios, the compressed
    /// pool and uzswap's metadata together (like memory.high, with the pool charged as cgroup
    /// v2 charges zswap). Required: the default, 0, is refused.
    pub memory_limit: u64,
    /// The unit of reclaim and swap-in, in bytes: a power of two from 4096 to 2 MiB.
    /// Default: 65536.
    pub folio_size: u64,
    /// Capacity of the swap file in bytes, at most 16 TiB; 0 for the region's size. Default: 0.
    pub swap_size: u64,
    /// The compressor, spelled as the kernel's `compressor` parameter: "lz4", "zstd",
    /// "zstd:3", "deflate", "deflate:9". NULL for the default, lz4. Read only by
    /// `uzswap_region_create`.
    pub compressor: *const c_char,
    /// Directory of the swap file (an unnamed `O_TMPFILE` file, never visible by name). NULL
    /// for the system's temporary directory (`$TMPDIR`, or /tmp). Read only by
    /// `uzswap_region_create`.
    pub swap_dir: *const c_char,
    /// `max_pool_percent`: the most of `memory_limit` the pool may take, in percent, 0 to
    /// 100; under it the region sizes the pool's share by what it costs the program.
    /// Default: 60.
    pub max_pool_percent: u32,
    /// Threads serving faults, 1 to 64 (a spare one serves besides them while they all wait
    /// on the swap file). Default: 2.
    pub fault_threads: u32,
    /// Background reclaim threads (the region's kswapd), 1 to 64. Default: 4.
    pub kswapd_threads: u32,
    /// `memory.zswap.writeback`: the pool may write its coldest pages to the swap file.
    /// Default: true.
    pub writeback: bool,
    /// `writethrough`: every stored page is also written to the swap file at store time, so
    /// that dropping it from a full pool costs no write. Default: false. (`auto`, by how
    /// full the pool is: `uzswap_region_set_param(region, "writethrough", "auto")`.)
    pub writethrough: bool,
    /// Give free swap space back to the file system a 2 MiB cluster at a time (the kernel's
    /// `swapon --discard`). Default: false.
    pub swap_discard: bool,
    /// Use user-mode-only userfaultfd, as a process without the permission for kernel-mode
    /// faults gets anyway: a system call that reads or writes an evicted page then fails with
    /// EFAULT instead of bringing it back. Default: false.
    pub user_mode_only: bool,
    /// Where written-back pages go: NULL or "file:DIR" for the swap file (in `swap_dir`, or
    /// DIR), or "redis://HOST:PORT[,HOST:PORT...]" for a Redis Cluster (each segment a key,
    /// acknowledged by a replica before its pages leave memory, leased, deleted when the
    /// region is destroyed). Read only by `uzswap_region_create`. Default: NULL.
    pub swap_to: *const c_char,
    /// How written-back pages are kept: 0, compressed and packed into segments of up to
    /// 64 KiB; 1, decompressed a page a slot, as the kernel's zswap writes back (the swap
    /// file only). Default: 0.
    pub swap_format: u32,
    /// Nonzero: segments in the clear. By default each is encrypted and authenticated
    /// (AES-256-GCM, a key per region made in memory), and a page changed on the device is
    /// poisoned, never returned. Default: 0.
    pub no_encrypt: u32,
}

/// The size of the struct's first version: the least `size` the library accepts. It stays as
/// it is when fields are added.
const FIRST_SIZE: usize = 64;

impl uzswap_config {
    /// `RegionConfig::new`'s defaults, with no memory limit.
    fn defaults() -> Self {
        let r = RegionConfig::new(0);
        uzswap_config {
            size: size_of::<uzswap_config>(),
            memory_limit: r.memory_limit,
            folio_size: r.folio_size as u64,
            swap_size: r.swap_size.unwrap_or(0),
            compressor: ptr::null(),
            swap_dir: ptr::null(),
            max_pool_percent: r.max_pool_percent,
            fault_threads: r.fault_threads as u32,
            kswapd_threads: r.kswapd_threads as u32,
            writeback: r.writeback,
            writethrough: r.writethrough == region::Writethrough::On,
            swap_discard: r.swap_discard,
            user_mode_only: r.user_mode_only,
            swap_to: ptr::null(),
            swap_format: 0,
            no_encrypt: u32::from(!r.encrypt),
        }
    }
}

/// Check a caller's `size`.
fn check_size(size: usize) -> Result<(), Failure> {
    match size >= FIRST_SIZE {
        true => Ok(()),
        false => Err(Failure::invalid(format!(
            "size: {size} bytes is smaller than any struct uzswap_config ({FIRST_SIZE} bytes)"
        ))),
    }
}

/// Fill `*config` with the defaults and set `config->size` to `size`, which must be
/// `sizeof(struct uzswap_config)`. Every field but `memory_limit` then holds a working
/// default. Returns `UZSWAP_OK`, or `UZSWAP_ERR_INVALID` for a NULL `config` or a `size`
/// smaller than any version of the struct.
///
/// # Safety
///
/// `config` is NULL or points to `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn uzswap_config_init(config: *mut uzswap_config, size: usize) -> c_int {
    call("uzswap_config_init", || {
        if config.is_null() {
            return Err(Failure::null("config"));
        }
        check_size(size)?;
        let ours = size_of::<uzswap_config>();
        let mut defaults = uzswap_config::defaults();
        defaults.size = size;
        let dst = config.cast::<u8>();
        // SAFETY: `config` points to `size` writable bytes (the caller's promise) and
        // `defaults` is a local `ours` bytes long; we copy the smaller of the two lengths,
        // and a struct without padding (tests.rs) has every one of those bytes initialized.
        unsafe {
            ptr::copy_nonoverlapping(ptr::from_ref(&defaults).cast::<u8>(), dst, size.min(ours))
        };
        if size > ours {
            // SAFETY: bytes `ours..size` lie within the caller's `size` writable bytes.
            unsafe { ptr::write_bytes(dst.add(ours), 0, size - ours) };
        }
        Ok(())
    })
}

/// The `RegionConfig` that `*config` describes. Only the syntax of its strings is checked
/// here; `Region::new` validates the rest.
///
/// # Safety
///
/// `config` is NULL or points to an initialized `struct uzswap_config` of `config->size`
/// readable bytes, whose `compressor`, `swap_dir` and `swap_to` are NULL or NUL-terminated
/// strings.
pub(crate) unsafe fn region_config(config: *const uzswap_config) -> Result<RegionConfig, Failure> {
    if config.is_null() {
        return Err(Failure::null("config"));
    }
    // SAFETY: `config` is not NULL and points to at least the `size` field (the caller's
    // promise: every version of the struct starts with it).
    let size = unsafe { ptr::addr_of!((*config).size).read() };
    check_size(size)?;
    let ours = size_of::<uzswap_config>();
    let mut c = uzswap_config::defaults();
    // SAFETY: the caller's struct holds `size` readable bytes; we read the smaller of that
    // and our own size into `c`. Every earlier version's size ends on a field boundary of
    // this one (fields are only added at the end, without padding), so no field is read in
    // part, and its bytes are a value of the field's type that C wrote (`bool` 0 or 1).
    unsafe {
        ptr::copy_nonoverlapping(
            config.cast::<u8>(),
            ptr::from_mut(&mut c).cast::<u8>(),
            size.min(ours),
        )
    };
    if size > ours {
        // SAFETY: bytes `ours..size` lie within the caller's `size` readable bytes.
        let tail =
            unsafe { std::slice::from_raw_parts(config.cast::<u8>().add(ours), size - ours) };
        if let Some(at) = tail.iter().position(|&b| b != 0) {
            return Err(Failure::invalid(format!(
                "size: the struct is {size} bytes and byte {} is set, past the {ours} bytes \
                 this library knows: a setting of a newer uzswap",
                ours + at
            )));
        }
    }

    let mut r = RegionConfig::new(c.memory_limit);
    r.folio_size = usize::try_from(c.folio_size).unwrap_or(usize::MAX);
    r.swap_size = (c.swap_size != 0).then_some(c.swap_size);
    // SAFETY: NULL or a NUL-terminated string (the caller's promise).
    if let Some(name) = unsafe { c_str(c.compressor) } {
        let name = name
            .to_str()
            .map_err(|_| Failure::invalid("compressor: the name is not UTF-8"))?;
        r.compressor = name
            .parse::<CompressorSpec>()
            .map_err(|e| Failure::invalid(format!("compressor: {e}")))?;
    }
    // SAFETY: NULL or a NUL-terminated string (the caller's promise).
    if let Some(dir) = unsafe { c_str(c.swap_dir) } {
        r.swap_dir = Some(PathBuf::from(OsStr::from_bytes(dir.to_bytes())));
    }
    r.max_pool_percent = c.max_pool_percent;
    r.fault_threads = c.fault_threads as usize;
    r.kswapd_threads = c.kswapd_threads as usize;
    r.writeback = c.writeback;
    r.writethrough = match c.writethrough {
        true => region::Writethrough::On,
        false => region::Writethrough::Off,
    };
    r.swap_discard = c.swap_discard;
    r.user_mode_only = c.user_mode_only;
    r.swap_format = match c.swap_format {
        0 => region::SwapFormat::Segments,
        1 => region::SwapFormat::Pages,
        n => {
            return Err(Failure::invalid(format!(
                "swap_format: {n} is not 0 (segments) or 1 (pages)"
            )))
        }
    };
    r.encrypt = c.no_encrypt == 0 && r.swap_format == region::SwapFormat::Segments;
    // SAFETY: NULL or a NUL-terminated string (the caller's promise).
    if let Some(to) = unsafe { c_str(c.swap_to) } {
        let to = to
            .to_str()
            .map_err(|_| Failure::invalid("swap_to: not UTF-8"))?;
        if let Some(dir) = to.strip_prefix("file:") {
            r.swap_dir = Some(PathBuf::from(dir));
        } else if to.starts_with("redis://") {
            let run = format!("capi-{}", redis_tier::new_run_id());
            let store = redis_tier::RedisSegments::connect(to, &run, Default::default())
                .map_err(|e| Failure::invalid(format!("swap_to: {e}")))?;
            r = r.segment_device(std::sync::Arc::new(store));
        } else {
            return Err(Failure::invalid(format!(
                "swap_to: {to:?} is not file:DIR or redis://HOST:PORT[,HOST:PORT...]"
            )));
        }
    }
    Ok(r)
}

/// A C string, or None for NULL.
///
/// # Safety
///
/// `s` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn c_str<'a>(s: *const c_char) -> Option<&'a CStr> {
    // SAFETY: not NULL here, so a NUL-terminated string living long enough (the caller's
    // promise).
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) })
}
