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
    t.keep_result(k("a"), 10, b"A".to_vec(), 2);
    t.keep_result(k("b"), 11, b"B".to_vec(), 2);
    t.keep_result(k("c"), 12, b"C".to_vec(), 2);
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
    t.keep_result(WaitKey::new(3, "m", "r"), 7, b"done".to_vec(), 10);
    let mut b = Vec::new();
    t.write(&mut b);
    let back = RecipeWaits::read(&mut Reader::new(&b)).unwrap();
    assert_eq!(back, t);
    // A truncated table is an error, not a panic.
    assert!(RecipeWaits::read(&mut Reader::new(&b[..b.len() - 3])).is_err());
}
