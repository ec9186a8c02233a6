//! Tests on a data directory written by Apache ZooKeeper 3.8 (Debian's
//! `zookeeper` package, `snapCount=4`; the log files' preallocated zeros cut
//! off): kazoo built a tree and the server was killed with a client still
//! connected. Between the snapshots and the logs it holds: a session with
//! an ephemeral, sequential nodes, digest and ip ACLs, binary and empty
//! data, a multi, a quota with its limit and stats nodes.

use super::*;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/zookeeper-3.8")
}

const SESSION: i64 = 72058322016927744;

#[test]
fn the_newest_snapshot_and_the_logs_after_it_give_zookeepers_tree() {
    let loaded = load_data_dir(&fixture(), None).unwrap();
    assert_eq!(loaded.snapshot_zxid, 0x19, "{:?}", loaded.warnings);
    assert!(loaded.replayed > 0);
    // Every log entry after the snapshot's digest zxid carries a digest,
    // and each matched the replayed tree.
    assert!(loaded.digests_matched >= loaded.replayed, "{loaded:?}");
    let t = &loaded.tree;
    let node = |p: &str| t.nodes.get(p).unwrap_or_else(|| panic!("{p} is missing"));
    assert_eq!(node("/app").data.as_deref(), Some(&b"hello2"[..]));
    assert_eq!(node("/app").stat.version, 1);
    assert!(!t.nodes.contains_key("/app/seq-0000000000"));
    assert_eq!(node("/app/seq-0000000001").data.as_deref(), Some(&b"x"[..]));
    assert_eq!(node("/app/eph").stat.ephemeral_owner, SESSION);
    assert!(t.sessions.contains_key(&SESSION));
    assert_eq!(node("/bin").data, Some((0..=255u8).collect::<Vec<_>>()));
    assert_eq!(node("/empty").data.as_deref(), Some(&b""[..]));
    let sec = &node("/sec").acl;
    assert_eq!(sec.len(), 1);
    assert_eq!(sec[0].scheme, "digest");
    assert!(sec[0].id.starts_with("alice:"));
    assert_eq!(
        &*node("/ip").acl,
        &[ZkAcl {
            perms: 1,
            scheme: "ip".into(),
            id: "127.0.0.1".into()
        }]
    );
    assert_eq!(node("/m1").stat.czxid, node("/m2").stat.czxid, "one multi");
    // /app, its two children left from the sequence and ephemeral, /app/q.
    assert_eq!(
        node("/zookeeper/quota/app/zookeeper_stats").data.as_deref(),
        Some(&b"count=4,bytes=13"[..])
    );
    assert_eq!(node("/many").children.len(), 10);
    assert_eq!(
        t.zxid,
        t.nodes
            .values()
            .map(|n| n.stat.mzxid.max(n.stat.pzxid))
            .max()
            .unwrap()
    );
}

#[test]
fn an_older_snapshot_replayed_further_gives_the_same_tree() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = dir.path().join("version-2");
    fs::create_dir(&v2).unwrap();
    for f in ["snapshot.15", "log.13", "log.17", "log.1b"] {
        fs::copy(fixture().join("version-2").join(f), v2.join(f)).unwrap();
    }
    let older = load_data_dir(dir.path(), None).unwrap();
    let newer = load_data_dir(&fixture(), None).unwrap();
    assert_eq!(older.snapshot_zxid, 0x15);
    assert_eq!(older.tree.zxid, newer.tree.zxid);
    assert_eq!(older.tree.nodes, newer.tree.nodes);
    assert_eq!(older.tree.sessions, newer.tree.sessions);
    assert_eq!(older.tree.digest(), newer.tree.digest());
}

/// A copy of the fixture to damage.
fn copy_fixture(files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let v2 = dir.path().join("version-2");
    fs::create_dir(&v2).unwrap();
    for f in files {
        fs::copy(fixture().join("version-2").join(f), v2.join(f)).unwrap();
    }
    dir
}

const ALL: [&str; 5] = ["snapshot.15", "snapshot.19", "log.13", "log.17", "log.1b"];

#[test]
fn a_snapshot_that_fails_its_checksum_is_skipped_for_the_older_one() {
    let dir = copy_fixture(&ALL);
    let snap = dir.path().join("version-2/snapshot.19");
    let mut bytes = fs::read(&snap).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    fs::write(&snap, bytes).unwrap();
    let loaded = load_data_dir(dir.path(), None).unwrap();
    assert_eq!(loaded.snapshot_zxid, 0x15);
    assert!(
        loaded.warnings.iter().any(|w| w.contains("snapshot.19")),
        "{:?}",
        loaded.warnings
    );
    let good = load_data_dir(&fixture(), None).unwrap();
    assert_eq!(loaded.tree.nodes, good.tree.nodes);
}

#[test]
fn a_corrupt_snapshot_with_nothing_older_is_refused_naming_it() {
    let dir = copy_fixture(&["snapshot.19", "log.17", "log.1b"]);
    let snap = dir.path().join("version-2/snapshot.19");
    let mut bytes = fs::read(&snap).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    fs::write(&snap, bytes).unwrap();
    let err = load_data_dir(dir.path(), None).unwrap_err().to_string();
    assert!(err.contains("snapshot.19"), "{err}");
    assert!(err.contains("offset"), "{err}");
}

#[test]
fn a_log_entry_that_fails_its_checksum_refuses_the_import_with_file_and_offset() {
    let dir = copy_fixture(&ALL);
    let log = dir.path().join("version-2/log.1b");
    let mut bytes = fs::read(&log).unwrap();
    // Inside the first entry's body: header 16, checksum 8, length 4.
    bytes[16 + 12 + 10] ^= 0x01;
    fs::write(&log, bytes).unwrap();
    match load_data_dir(dir.path(), None).unwrap_err() {
        ZkImportError::Corrupt { file, offset, what } => {
            assert_eq!(file, log);
            assert_eq!(offset, 16);
            assert!(what.contains("checksum"), "{what}");
        }
        e => panic!("expected a corrupt log, got {e}"),
    }
}

#[test]
fn a_torn_last_entry_is_cut_as_zookeeper_cuts_it() {
    // ZooKeeper's FileTxnIterator: an entry cut short, or without its
    // end marker, ends the log; the txns before it are all there.
    let full = load_data_dir(&fixture(), None).unwrap();
    for cut in [1usize, 5, 13] {
        let dir = copy_fixture(&ALL);
        let log = dir.path().join("version-2/log.1b");
        let mut bytes = fs::read(&log).unwrap();
        bytes.truncate(bytes.len() - cut);
        // Preallocated space after the torn write.
        bytes.extend(std::iter::repeat_n(0u8, 4096));
        fs::write(&log, bytes).unwrap();
        let torn = load_data_dir(dir.path(), None).unwrap();
        assert_eq!(torn.replayed + 1, full.replayed, "cut {cut}");
        assert!(torn.tree.zxid < full.tree.zxid);
        assert!(
            torn.warnings
                .iter()
                .any(|w| w.contains("log.1b") && w.contains("never acknowledged")),
            "{:?}",
            torn.warnings
        );
    }
}

#[test]
fn a_gap_inside_an_epoch_is_refused() {
    // Without log.17, the txns between snapshot.15's and log.1b's are lost.
    let dir = copy_fixture(&["snapshot.15", "log.13", "log.1b"]);
    let err = load_data_dir(dir.path(), None).unwrap_err().to_string();
    assert!(err.contains("missing"), "{err}");
    assert!(err.contains("log.1b"), "{err}");
}

#[test]
fn a_directory_without_snapshots_is_refused() {
    let dir = copy_fixture(&["log.13"]);
    let err = load_data_dir(dir.path(), None).unwrap_err().to_string();
    assert!(err.contains("no ZooKeeper snapshot"), "{err}");
}

mod mutations {
    use super::*;
    use proptest::prelude::*;

    fn damaged(original: &[u8], edits: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
        let mut b = original.to_vec();
        for &(at, v) in edits {
            if !b.is_empty() {
                let i = at % b.len();
                b[i] = v;
            }
        }
        if let Some(c) = cut {
            b.truncate(c % (original.len() + 1));
        }
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        // Bytes from disk are untrusted: any damage to a real snapshot or
        // log is an error or a parse, never a panic or a huge allocation.
        #[test]
        fn a_damaged_snapshot_never_panics(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in proptest::option::of(any::<usize>()),
        ) {
            let original = fs::read(fixture().join("version-2/snapshot.19")).unwrap();
            let bytes = damaged(&original, &edits, cut);
            if let Ok(snap) = parse_snapshot(&bytes) {
                let _ = ZkTree::from_snapshot(&snap, 0x19);
            }
        }

        #[test]
        fn a_damaged_log_never_panics(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in proptest::option::of(any::<usize>()),
        ) {
            let original = fs::read(fixture().join("version-2/log.17")).unwrap();
            let bytes = damaged(&original, &edits, cut);
            let _ = parse_log(&bytes);
            // Entries decoded without the checksum in the way.
            let _ = decode_entry(&bytes[16.min(bytes.len())..], 16);
        }
    }
}

// ZooKeeper Administrator's Guide, "The Data Directory": a snapshot wazoo
// writes for ZooKeeper is ZooKeeper's own format, byte for byte: the
// snapshots ZooKeeper 3.8 wrote, parsed and written again, are the same
// files (seals and digest included), and a digest of an older version is
// written as hex, as ZooKeeper before 3.6.3 wrote it.
#[test]
fn a_snapshot_zookeeper_wrote_is_written_again_byte_for_byte() {
    for name in ["snapshot.15", "snapshot.19"] {
        let original = fs::read(fixture().join("version-2").join(name)).unwrap();
        let parsed = parse_snapshot(&original).unwrap();
        assert!(parsed.digest.is_some(), "{name} has a digest");
        assert!(encode_snapshot(&parsed) == original, "{name} differs");
    }
    let mut snap =
        parse_snapshot(&fs::read(fixture().join("version-2/snapshot.19")).unwrap()).unwrap();
    snap.digest = Some(ZxidDigest {
        zxid: 0x19,
        version: 1,
        digest: -2,
    });
    snap.last_processed_zxid = Some(0x19);
    assert_eq!(parse_snapshot(&encode_snapshot(&snap)).unwrap(), snap);
    snap.digest = None;
    assert_eq!(parse_snapshot(&encode_snapshot(&snap)).unwrap(), snap);
}

// ZooKeeper Administrator's Guide, "The Data Directory": snapshot and log
// files are named by the hex zxid they start at, read as Java's
// `Long.parseLong(hex, 16)` reads it.
#[test]
fn a_file_name_past_a_long_or_signed_is_no_txn_file() {
    assert_eq!(
        zxid_from_name("log.100000001", "log"),
        Some((0x1_0000_0001, None))
    );
    assert_eq!(
        zxid_from_name("snapshot.7fffffffffffffff.snap", "snapshot"),
        Some((i64::MAX, Some("snap".to_string())))
    );
    assert_eq!(zxid_from_name("log.8000000000000000", "log"), None);
    assert_eq!(zxid_from_name("log.-5", "log"), None);
    assert_eq!(zxid_from_name("log.+5", "log"), None);
    assert_eq!(zxid_from_name("snapshot.5", "log"), None);
}

/// Jute by hand, as ZooKeeper writes it: big-endian, a buffer's null is
/// length -1.
fn put_i32(b: &mut Vec<u8>, v: i32) {
    b.extend_from_slice(&v.to_be_bytes());
}
fn put_i64(b: &mut Vec<u8>, v: i64) {
    b.extend_from_slice(&v.to_be_bytes());
}
fn put_buf(b: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        None => put_i32(b, -1),
        Some(v) => {
            put_i32(b, v.len() as i32);
            b.extend_from_slice(v);
        }
    }
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Data Model": ZooKeeper keeps
/// a node's null data null, and writes it as a buffer of length -1 in its
/// snapshots (`DataNode.data`) and txns (`CreateTxn`, `SetDataTxn`). The
/// import keeps it null, apart from empty data.
#[test]
fn null_data_in_zookeepers_snapshot_and_txns_stays_null() {
    let mut b = Vec::new();
    put_i32(&mut b, SNAP_MAGIC);
    put_i32(&mut b, 2);
    put_i64(&mut b, 0); // dbid
    put_i32(&mut b, 0); // sessions
    put_i32(&mut b, 0); // ACL lists
    for (path, data) in [("", Some(&b""[..])), ("/n", None), ("/e", Some(&b""[..]))] {
        put_buf(&mut b, Some(path.as_bytes()));
        put_buf(&mut b, data);
        put_i64(&mut b, -1); // world:anyone
        for v in [1i64, 1, 0, 0] {
            put_i64(&mut b, v); // czxid mzxid ctime mtime
        }
        for v in [0i32, 0, 0] {
            put_i32(&mut b, v); // version cversion aversion
        }
        put_i64(&mut b, 0); // ephemeralOwner
        put_i64(&mut b, 1); // pzxid
    }
    put_buf(&mut b, Some(b"/"));
    let seal = super::jute::Adler32::of(&b);
    put_i64(&mut b, i64::from(seal));
    put_buf(&mut b, Some(b"/"));
    let snap = parse_snapshot(&b).unwrap();
    let mut t = ZkTree::from_snapshot(&snap, 1).unwrap();
    assert_eq!(t.nodes["/n"].data, None);
    assert_eq!(t.nodes["/e"].data.as_deref(), Some(&b""[..]));

    // A create with null data and a setData to null, as ZooKeeper logs them.
    let entry = |zxid: i64, op: i32, body: &dyn Fn(&mut Vec<u8>)| {
        let mut e = Vec::new();
        put_i64(&mut e, 5); // clientId
        put_i32(&mut e, 1); // cxid
        put_i64(&mut e, zxid);
        put_i64(&mut e, 100); // time
        put_i32(&mut e, op);
        body(&mut e);
        decode_entry(&e, 0).unwrap()
    };
    let create = entry(2, op::CREATE, &|e| {
        put_buf(e, Some(b"/c"));
        put_buf(e, None);
        put_i32(e, -1); // a null ACL vector: OPEN_ACL_UNSAFE
        e.push(0); // not ephemeral
        put_i32(e, 1); // parentCVersion
    });
    let set = entry(3, op::SET_DATA, &|e| {
        put_buf(e, Some(b"/e"));
        put_buf(e, None);
        put_i32(e, 1);
    });
    for entry in [create, set] {
        t.apply(&entry.header, &entry.txn);
    }
    assert_eq!(t.nodes["/c"].data, None);
    assert_eq!(t.nodes["/e"].data, None);
    assert_eq!(t.nodes["/e"].stat.version, 1);
}
