use super::*;

fn wait(session: i64, token: &str, path: &str, child: bool) -> RecipeWait {
    RecipeWait {
        session,
        module: "m".into(),
        token: token.into(),
        path: path.into(),
        child,
        auth: vec![Id {
            scheme: "digest".into(),
            id: "u:x".into(),
        }],
        guid: format!("g-{token}"),
        call_node: String::new(),
        fired: None,
    }
}

#[test]
fn prefixes_are_whole_components() {
    let p = vec!["/locks".to_string(), "/q/items".to_string()];
    assert!(path_within("/locks", &p));
    assert!(path_within("/locks/a/b", &p));
    assert!(path_within("/q/items/x", &p));
    assert!(!path_within("/locksmith", &p));
    assert!(!path_within("/q", &p));
    assert!(!path_within("/", &p));
    assert!(path_within("/anything", &["/".to_string()]));
    assert!(!path_within("/x", &[]));
}

#[test]
fn data_waits_fire_on_data_events_and_child_waits_on_child_events() {
    let mut t = RecipeWaits::default();
    t.register(wait(1, "a", "/x", false));
    t.register(wait(2, "b", "/x", true));
    assert_eq!(
        t.trigger("/x", EventType::NodeChildrenChanged),
        vec![WaitKey::new(2, "m", "b")]
    );
    assert_eq!(
        t.trigger("/x", EventType::NodeDataChanged),
        vec![WaitKey::new(1, "m", "a")]
    );
    // One-shot: fired waits do not fire again.
    assert!(t.trigger("/x", EventType::NodeDeleted).is_empty());
    assert_eq!(t.fired().len(), 2);
    assert_eq!(
        t.get(&WaitKey::new(1, "m", "a")).unwrap().fired,
        Some(("/x".into(), WatchEvent::DataChanged))
    );
}

#[test]
fn a_session_end_drops_only_its_waits() {
    let mut t = RecipeWaits::default();
    t.register(wait(1, "a", "/x", false));
    t.register(wait(1, "b", "/y", false));
    t.register(wait(2, "a", "/x", false));
    assert_eq!(t.count_for(1), 2);
    t.drop_session(1);
    assert_eq!(t.len(), 1);
    assert_eq!(t.trigger("/x", EventType::NodeDeleted).len(), 1);
    assert!(t.trigger("/y", EventType::NodeDeleted).is_empty());
}

#[test]
fn registering_the_same_token_replaces_the_watch() {
    let mut t = RecipeWaits::default();
    t.register(wait(1, "a", "/x", false));
    t.register(wait(1, "a", "/y", false));
    assert!(t.trigger("/x", EventType::NodeDeleted).is_empty());
    assert_eq!(t.trigger("/y", EventType::NodeDeleted).len(), 1);
}

#[test]
fn results_are_kept_per_wait_bounded_and_forgotten_on_a_new_round() {
    let mut t = RecipeWaits::default();
    let k = |tok: &str| WaitKey::new(1, "m", tok);
    t.keep_result(k("a"), Zxid(10), b"A".to_vec(), 2);
    t.keep_result(k("b"), Zxid(11), b"B".to_vec(), 2);
    t.keep_result(k("c"), Zxid(12), b"C".to_vec(), 2);
    assert_eq!(
        t.results_of(1),
        vec![&b"B"[..], &b"C"[..]],
        "the oldest went"
    );
    t.register(wait(1, "b", "/x", false));
    assert_eq!(
        t.results_of(1),
        vec![&b"C"[..]],
        "a new round of b forgets its result"
    );
    t.drop_session(1);
    assert!(t.results_of(1).is_empty());
}

#[test]
fn the_table_round_trips_through_its_binary_form() {
    let mut t = RecipeWaits::default();
    t.register(wait(1, "a", "/x", false));
    t.register(wait(3, "c", "/z", true));
    t.trigger("/z", EventType::NodeDeleted);
    t.keep_result(WaitKey::new(3, "m", "r"), Zxid(7), b"done".to_vec(), 10);
    let mut b = Vec::new();
    t.write(&mut b);
    let back = RecipeWaits::read(&mut Reader::new(&b)).unwrap();
    assert_eq!(back, t);
    // A truncated table is an error, not a panic.
    assert!(RecipeWaits::read(&mut Reader::new(&b[..b.len() - 3])).is_err());
}

/// The zxids of kept results and deployed modules are saved as jute longs
/// (big-endian, 8 bytes), as snapshots written before they were typed
/// `Zxid` hold them: such a snapshot still loads, and is written back the
/// same.
#[test]
fn saved_zxids_are_jute_longs_as_older_snapshots_hold_them() {
    let be = |z: i64| z.to_be_bytes().to_vec();
    let jstr = |s: &str| [&(s.len() as i32).to_be_bytes()[..], s.as_bytes()].concat();
    // No waits, one kept result of session 3 ended at 0x500000002.
    let results = [
        &0i32.to_be_bytes()[..],
        &1i32.to_be_bytes(),
        &be(3),
        &jstr("m"),
        &jstr("r"),
        &be(0x5_0000_0002),
        &jstr("done"),
    ]
    .concat();
    let t = RecipeWaits::read(&mut Reader::new(&results)).unwrap();
    assert_eq!(
        t.results,
        BTreeMap::from([(
            WaitKey::new(3, "m", "r"),
            (Zxid::new(5, 2), b"done".to_vec())
        )])
    );
    let mut back = Vec::new();
    t.write(&mut back);
    assert_eq!(back, results, "written back byte for byte");

    // One module deployed at 0x500000001.
    let modules = [
        &1i32.to_be_bytes()[..],
        &jstr("m"),
        &jstr("1.0.0"),
        &jstr("ab"),
        &jstr("\0asm"),
        &be(0x5_0000_0001),
        &jstr("client"),
    ]
    .concat();
    let mut t = RecipeWaits::default();
    t.read_modules(&mut Reader::new(&modules)).unwrap();
    assert_eq!(t.modules["m"].zxid, Zxid::new(5, 1));
    let mut back = Vec::new();
    t.write_modules(&mut back);
    assert_eq!(back, modules, "written back byte for byte");
}
