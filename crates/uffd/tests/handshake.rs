//! The handshake and registration report what this kernel (6.18) offers.

use uffd::{Features, Ioctls, RawRegion, RegisterMode, UffdBuilder};

#[test]
fn handshake_grants_move_poison_and_the_events() {
    let u = UffdBuilder::new().create().unwrap();
    eprintln!("granted: {:?}", u.features());
    eprintln!("supported: {:?}", u.supported_features());
    eprintln!("api ioctls: {:?}", u.api_ioctls());
    assert!(u.features().contains(Features::MOVE));
    assert!(u.features().contains(Features::POISON));
    assert!(u.features().contains(Features::REQUIRED_DEFAULT));
    assert!(u
        .features()
        .contains(Features::PAGEFAULT_FLAG_WP | Features::THREAD_ID));
    assert!(
        !u.features().contains(Features::EVENT_FORK),
        "fork only when asked"
    );
    assert!(u
        .api_ioctls()
        .contains(Ioctls::REGISTER | Ioctls::UNREGISTER | Ioctls::API));
    // Root here: kernel-mode faults are allowed.
    assert!(!u.user_mode_only());
    assert!(u.mode_warning().is_none());
}

#[test]
fn register_reports_the_range_ioctls() {
    let u = UffdBuilder::new().create().unwrap();
    let r = RawRegion::new(4 * uffd::page_size()).unwrap();
    let io = u
        .register(&r, 0, r.len(), RegisterMode::MISSING_WP)
        .unwrap();
    eprintln!("range ioctls: {io:?}");
    assert!(io.contains(
        Ioctls::COPY
            | Ioctls::ZEROPAGE
            | Ioctls::MOVE
            | Ioctls::WAKE
            | Ioctls::POISON
            | Ioctls::WRITEPROTECT
    ));
    u.unregister(r.addr(), r.len()).unwrap();
}

#[test]
fn forced_user_mode_only_is_reported() {
    let u = UffdBuilder::new().user_mode_only(true).create().unwrap();
    assert!(u.user_mode_only());
    assert!(u.mode_warning().unwrap().contains("EFAULT"));
}

#[test]
fn event_fork_is_granted_to_root_when_asked() {
    let u = UffdBuilder::new().event_fork(true).create().unwrap();
    assert!(u.features().contains(Features::EVENT_FORK));
}

#[test]
fn region_ranges_are_checked() {
    let u = UffdBuilder::new().create().unwrap();
    let r = RawRegion::new(2 * uffd::page_size()).unwrap();
    assert!(u
        .register(&r, 0, 3 * uffd::page_size(), RegisterMode::MISSING)
        .is_err());
    assert!(u
        .register(&r, 1, uffd::page_size(), RegisterMode::MISSING)
        .is_err());
}
