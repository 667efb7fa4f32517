//! The C API called as C calls it: through raw pointers, checking statuses and messages.

use std::ffi::{c_char, c_int, CStr, CString};
use std::mem::{offset_of, size_of, MaybeUninit};
use std::ptr::{self, null, null_mut};

use crate::config::uzswap_config;
use crate::error::{call, uzswap_status::*};
use crate::*;

const OK: c_int = UZSWAP_OK as c_int;
const INVALID: c_int = UZSWAP_ERR_INVALID as c_int;

/// `uzswap_config_init`'s defaults with a memory limit.
fn config(memory_limit: u64) -> uzswap_config {
    let mut c = MaybeUninit::<uzswap_config>::uninit();
    // SAFETY: `c` is `size_of::<uzswap_config>()` writable bytes.
    let status = unsafe { uzswap_config_init(c.as_mut_ptr(), size_of::<uzswap_config>()) };
    assert_eq!(status, OK);
    // SAFETY: init wrote every byte (the struct has no padding).
    let mut c = unsafe { c.assume_init() };
    c.memory_limit = memory_limit;
    c
}

/// This thread's last error.
fn last_error() -> String {
    // SAFETY: uzswap_last_error returns a NUL-terminated string, valid until the next failure.
    unsafe { CStr::from_ptr(uzswap_last_error()) }
        .to_str()
        .unwrap()
        .to_string()
}

/// A region destroyed when dropped.
#[derive(Debug)]
struct Made(*mut uzswap_region);

impl Drop for Made {
    fn drop(&mut self) {
        // SAFETY: made by uzswap_region_create, destroyed once.
        unsafe { uzswap_region_destroy(self.0) }
    }
}

/// `uzswap_region_create`, or its status and message.
fn create(size: usize, config: &uzswap_config) -> Result<Made, (c_int, String)> {
    let mut out = ptr::dangling_mut();
    // SAFETY: a filled config; `out` is a local.
    let status = unsafe { uzswap_region_create(size, config, &mut out) };
    match status {
        OK => Ok(Made(out)),
        _ => {
            assert!(out.is_null(), "a failed create leaves *out NULL");
            Err((status, last_error()))
        }
    }
}

/// A string uzswap returned, freed.
fn take(s: *mut c_char) -> String {
    assert!(!s.is_null());
    // SAFETY: a string from uzswap, freed once here.
    let text = unsafe { CStr::from_ptr(s) }.to_str().unwrap().to_string();
    // SAFETY: as above.
    unsafe { uzswap_string_free(s) };
    text
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn stat(r: &Made, name: &str) -> u64 {
    let mut v = u64::MAX;
    // SAFETY: a live region, a C string, a local.
    let status = unsafe { uzswap_region_stat(r.0, c(name).as_ptr(), &mut v) };
    assert_eq!(status, OK, "{}", last_error());
    v
}

fn set_param(r: &Made, name: &str, value: &str) -> c_int {
    // SAFETY: a live region and C strings.
    unsafe { uzswap_region_set_param(r.0, c(name).as_ptr(), c(value).as_ptr()) }
}

fn get_param(r: &Made, name: &str) -> String {
    let mut v = null_mut();
    // SAFETY: a live region, a C string, a local.
    let status = unsafe { uzswap_region_get_param(r.0, c(name).as_ptr(), &mut v) };
    assert_eq!(status, OK, "{}", last_error());
    take(v)
}

#[test]
fn the_config_struct_has_no_padding_so_every_older_size_ends_on_a_field() {
    let c = config(0);
    let fields = [
        size_of_val(&c.size),
        size_of_val(&c.memory_limit),
        size_of_val(&c.folio_size),
        size_of_val(&c.swap_size),
        size_of_val(&c.compressor),
        size_of_val(&c.swap_dir),
        size_of_val(&c.max_pool_percent),
        size_of_val(&c.fault_threads),
        size_of_val(&c.kswapd_threads),
        size_of_val(&c.writeback),
        size_of_val(&c.writethrough),
        size_of_val(&c.swap_discard),
        size_of_val(&c.user_mode_only),
        size_of_val(&c.swap_to),
        size_of_val(&c.swap_format),
        size_of_val(&c.no_encrypt),
    ];
    assert_eq!(fields.iter().sum::<usize>(), size_of::<uzswap_config>());
    assert_eq!(size_of::<uzswap_config>(), 80, "the second version's size");
    assert_eq!(offset_of!(uzswap_config, size), 0);
    // The first version (64 bytes) ends where the second's first field starts.
    assert_eq!(offset_of!(uzswap_config, swap_to), 64);
}

#[test]
fn init_gives_region_configs_defaults() {
    let c = config(0);
    let r = ::region::RegionConfig::new(0);
    assert_eq!(c.size, size_of::<uzswap_config>());
    assert_eq!(c.folio_size, r.folio_size as u64);
    assert_eq!(c.max_pool_percent, r.max_pool_percent);
    assert_eq!(c.fault_threads as usize, r.fault_threads);
    assert_eq!(c.kswapd_threads as usize, r.kswapd_threads);
    assert_eq!(
        (c.writeback, c.writethrough, c.swap_discard),
        (true, false, false)
    );
    assert!(c.compressor.is_null() && c.swap_dir.is_null());
}

/// 32 MiB written under an 8 MiB limit: pages are compressed (zswpout), every byte comes back
/// as written, and the statistics say so in text, JSON and one by one.
#[test]
fn a_region_past_its_limit_gives_every_byte_back() {
    let mut cfg = config(8 << 20);
    let zstd = c("zstd");
    cfg.compressor = zstd.as_ptr();
    let r = create(32 << 20, &cfg).unwrap();
    // SAFETY: a live region.
    let (base, len) = unsafe { (uzswap_region_ptr(r.0).cast::<u8>(), uzswap_region_len(r.0)) };
    assert_eq!(len, 32 << 20);
    // Compressible, different on every page, not same-filled.
    let byte = |i: usize| ((i / 4096) as u8).wrapping_mul(7) ^ (i % 251) as u8;
    // SAFETY: `len` bytes at `base` are the region's memory, ordinary memory to this thread.
    let mem = unsafe { std::slice::from_raw_parts_mut(base, len) };
    mem.iter_mut().enumerate().for_each(|(i, b)| *b = byte(i));
    let bad = mem.iter().enumerate().position(|(i, b)| *b != byte(i));
    assert_eq!(bad, None, "a byte came back different");

    assert!(stat(&r, "zswpout") > 0);
    assert!(stat(&r, "zswpin") > 0);
    assert!(stat(&r, "faults") > 0);
    assert_eq!(stat(&r, "memory_limit_bytes"), 8 << 20);
    assert_eq!(get_param(&r, "compressor"), "zstd");

    let mut text = null_mut();
    let mut json = null_mut();
    // SAFETY: a live region and locals.
    unsafe {
        assert_eq!(uzswap_region_stats_text(r.0, &mut text), OK);
        assert_eq!(uzswap_region_stats_json(r.0, &mut json), OK);
    }
    let (text, json) = (take(text), take(json));
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let json = json.as_object().unwrap();
    let lines: Vec<(&str, &str)> = text.lines().map(|l| l.split_once(' ').unwrap()).collect();
    for name in ["zswpout", "stored_pages", "faults", "pages_per_fault"] {
        assert!(lines.iter().any(|(n, _)| *n == name), "{name}: {text}");
    }
    assert_eq!(
        lines.last().map(|l| l.0),
        Some("memory_limit_bytes"),
        "{text}"
    );
    // The same names, each once, in both; the counters of a region at rest agree.
    assert_eq!(json.len(), lines.len(), "a name twice?\n{text}");
    for (name, value) in &lines {
        let j = &json[*name];
        match *name {
            "pages_per_fault" => assert!(j.as_f64().unwrap() > 0.0),
            "zswpout" | "zswpin" | "memory_limit_bytes" => {
                assert_eq!(j.as_u64().unwrap(), value.parse::<u64>().unwrap(), "{name}")
            }
            _ => assert!(j.is_u64(), "{name}: {j}"),
        }
    }
}

#[test]
fn set_param_changes_a_tunable_and_refuses_bad_names_and_values() {
    let r = create(4 << 20, &config(16 << 20)).unwrap();
    assert_eq!(set_param(&r, "max_pool_percent", "50"), OK);
    assert_eq!(get_param(&r, "max_pool_percent"), "50");
    assert_eq!(set_param(&r, "accept_threshold_percent", "80"), OK);
    assert_eq!(set_param(&r, "writethrough", "Y"), OK);
    assert_eq!(get_param(&r, "writethrough"), "Y");
    assert_eq!(set_param(&r, "compressor", "deflate"), OK);
    assert_eq!(get_param(&r, "compressor"), "deflate");

    assert_eq!(set_param(&r, "zpool", "zbud"), INVALID);
    let e = last_error();
    assert!(
        e.starts_with("uzswap_region_set_param: unknown tunable 'zpool'"),
        "{e}"
    );
    assert!(e.contains("max_pool_percent"), "the known names: {e}");
    assert_eq!(set_param(&r, "max_pool_percent", "101"), INVALID);
    assert!(
        last_error().contains("between 0 and 100"),
        "{}",
        last_error()
    );
    assert_eq!(set_param(&r, "compressor", "snappy"), INVALID);
    assert!(last_error().contains("unknown compressor"));
    assert_eq!(get_param(&r, "max_pool_percent"), "50", "left as it was");
    assert_eq!(get_param(&r, "compressor"), "deflate");
}

#[test]
fn a_bad_configuration_is_refused_naming_the_field() {
    let refused = |cfg: &uzswap_config| create(4 << 20, cfg).unwrap_err();

    let (status, e) = refused(&config(0));
    assert_eq!(status, INVALID);
    assert!(e.starts_with("uzswap_region_create: memory_limit: "), "{e}");

    let mut cfg = config(16 << 20);
    cfg.folio_size = 12 << 10;
    let (status, e) = refused(&cfg);
    assert_eq!(status, INVALID);
    assert!(e.contains("folio_size"), "{e}");

    let mut cfg = config(16 << 20);
    cfg.fault_threads = 0;
    assert!(refused(&cfg).1.contains("fault_threads"));

    let mut cfg = config(16 << 20);
    let name = c("snappy");
    cfg.compressor = name.as_ptr();
    let (status, e) = refused(&cfg);
    assert_eq!(status, INVALID);
    assert!(e.contains("compressor: unknown compressor 'snappy'"), "{e}");

    let mut cfg = config(16 << 20);
    let dir = c("/nonexistent/uzswap");
    cfg.swap_dir = dir.as_ptr();
    let (status, e) = refused(&cfg);
    assert_eq!(status, UZSWAP_ERR_IO as c_int);
    assert!(e.contains("/nonexistent/uzswap"), "{e}");

    let mut cfg = config(16 << 20);
    cfg.size = 8;
    let (status, e) = refused(&cfg);
    assert_eq!(status, INVALID);
    assert!(e.contains("size: 8 bytes"), "{e}");
}

/// A program built against a later header passes a larger struct: its zeroed tail (as
/// `uzswap_config_init` leaves it) is accepted, a setting there is refused.
#[test]
fn a_larger_struct_is_accepted_only_with_a_zero_tail() {
    #[repr(C)]
    struct Later {
        config: uzswap_config,
        more: u64,
    }
    let mut later = MaybeUninit::<Later>::uninit();
    // SAFETY: `later` is `size_of::<Later>()` writable bytes.
    let status = unsafe { uzswap_config_init(later.as_mut_ptr().cast(), size_of::<Later>()) };
    assert_eq!(status, OK);
    // SAFETY: init wrote the config's bytes and zeroed the rest.
    let mut later = unsafe { later.assume_init() };
    assert_eq!((later.config.size, later.more), (size_of::<Later>(), 0));
    later.config.memory_limit = 16 << 20;
    create(4 << 20, &later.config).unwrap();
    later.more = 1;
    let (status, e) = create(4 << 20, &later.config).unwrap_err();
    assert_eq!(status, INVALID);
    assert!(e.contains("a setting of a newer uzswap"), "{e}");
}

#[test]
fn null_pointers_are_invalid_arguments_and_never_dereferenced() {
    let r = create(4 << 20, &config(16 << 20)).unwrap();
    let name = c("zswpout");
    let mut out = null_mut();
    let mut text = null_mut();
    let mut value = 0u64;
    // SAFETY: every pointer is NULL, a live region, a C string or a local.
    unsafe {
        assert_eq!(uzswap_config_init(null_mut(), 64), INVALID);
        assert_eq!(last_error(), "uzswap_config_init: config is NULL");
        assert_eq!(uzswap_region_create(1 << 20, null(), &mut out), INVALID);
        assert_eq!(last_error(), "uzswap_region_create: config is NULL");
        assert_eq!(
            uzswap_region_create(1 << 20, &config(16 << 20), null_mut()),
            INVALID
        );
        assert_eq!(last_error(), "uzswap_region_create: out is NULL");
        assert!(uzswap_region_ptr(null()).is_null());
        assert_eq!(uzswap_region_len(null()), 0);
        assert_eq!(uzswap_region_stats_text(null(), &mut text), INVALID);
        assert_eq!(last_error(), "uzswap_region_stats_text: region is NULL");
        assert_eq!(uzswap_region_stats_text(r.0, null_mut()), INVALID);
        assert_eq!(last_error(), "uzswap_region_stats_text: text is NULL");
        assert_eq!(uzswap_region_stats_json(r.0, null_mut()), INVALID);
        assert_eq!(uzswap_region_stat(r.0, null(), &mut value), INVALID);
        assert_eq!(last_error(), "uzswap_region_stat: name is NULL");
        assert_eq!(uzswap_region_stat(r.0, name.as_ptr(), null_mut()), INVALID);
        assert_eq!(uzswap_region_set_param(r.0, name.as_ptr(), null()), INVALID);
        assert_eq!(last_error(), "uzswap_region_set_param: value is NULL");
        assert_eq!(uzswap_region_get_param(r.0, null(), null_mut()), INVALID);
        uzswap_region_destroy(null_mut());
        uzswap_string_free(null_mut());
    }
}

#[test]
fn an_unknown_statistic_is_refused() {
    let r = create(4 << 20, &config(16 << 20)).unwrap();
    let mut value = 7u64;
    // SAFETY: a live region, a C string, a local.
    let status = unsafe { uzswap_region_stat(r.0, c("zswpbogus").as_ptr(), &mut value) };
    assert_eq!(status, INVALID);
    assert_eq!(
        last_error(),
        "uzswap_region_stat: no statistic is named 'zswpbogus'"
    );
    assert_eq!(value, 7, "nothing written");
}

#[test]
fn the_last_error_is_the_calling_threads_and_stays_until_the_next_failure() {
    std::thread::spawn(|| {
        assert_eq!(last_error(), "", "no failure on this thread yet");
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { uzswap_config_init(null_mut(), 64) }, INVALID);
        let message = uzswap_last_error();
        std::thread::spawn(|| {
            // SAFETY: as above.
            unsafe { uzswap_config_init(null_mut(), 1) };
        })
        .join()
        .unwrap();
        let _ = config(0); // a call that succeeds
        assert_eq!(uzswap_last_error(), message, "the same string, still valid");
        assert_eq!(last_error(), "uzswap_config_init: config is NULL");
    })
    .join()
    .unwrap();
}

#[test]
fn a_panic_becomes_an_internal_error_instead_of_unwinding_into_c() {
    let status = call("uzswap_test", || panic!("boom"));
    assert_eq!(status, UZSWAP_ERR_INTERNAL as c_int);
    assert_eq!(
        last_error(),
        "uzswap_test: internal error (a bug in uzswap): boom"
    );
}

#[test]
fn swap_to_and_swap_format_are_checked_and_a_file_tier_works() {
    for (to, format, needle) in [
        (Some("ftp://host"), 0, "is not file:DIR or redis://"),
        (Some("redis://nohost"), 0, "redis://HOST:PORT"),
        (Some("redis://127.0.0.1:1"), 0, "cannot be used"),
        (None, 7, "swap_format: 7"),
    ] {
        let mut cfg = config(16 << 20);
        let to = to.map(c);
        cfg.swap_to = to.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        cfg.swap_format = format;
        let Err((_, e)) = create(64 << 20, &cfg) else {
            panic!("{needle}: accepted");
        };
        assert!(e.contains(needle), "{e}");
    }
    let dir = c(&format!("file:{}", std::env::temp_dir().display()));
    let mut cfg = config(16 << 20);
    cfg.swap_to = dir.as_ptr();
    cfg.swap_format = 1;
    cfg.no_encrypt = 1;
    create(64 << 20, &cfg).expect("pages in a swap file in the temp directory");
}
