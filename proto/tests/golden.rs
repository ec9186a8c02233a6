//! Golden bytes: frames captured from a real Apache ZooKeeper 3.8
//! (tests/golden/*.hex, see tests/golden/README.md) decode with this crate
//! and re-encode to exactly the same bytes.

use std::collections::HashMap;
use std::path::PathBuf;

use wazoo_proto::frame::{self, ClientFrame};
use wazoo_proto::jute::{Jute, Reader};
use wazoo_proto::{ConnectRequest, ConnectResponse, OpCode, ReplyHeader, Response, WatcherEvent};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/golden")
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// (direction, connection, frame bytes without the length prefix).
fn frames(text: &str) -> Vec<(char, String, Vec<u8>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(dir) = line.chars().next() else {
            continue;
        };
        if dir != '>' && dir != '<' {
            continue;
        }
        let (conn, hex) = line[1..].split_once(' ').expect("conn and hex");
        let bytes = unhex(hex.trim());
        let n = frame::check(&bytes, usize::MAX)
            .unwrap()
            .expect("whole frame");
        assert_eq!(n, bytes.len(), "one frame per line");
        out.push((dir, conn.to_string(), bytes[4..].to_vec()));
    }
    out
}

#[test]
fn captured_zookeeper_frames_decode_and_reencode_byte_for_byte() {
    let mut files: Vec<_> = std::fs::read_dir(golden_dir())
        .expect("tests/golden exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "hex"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "golden files present: {}", files.len());
    let mut checked = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        // The opcode of each request in flight, per connection and xid.
        let mut inflight: HashMap<(String, i32), OpCode> = HashMap::new();
        let mut handshake_pending: HashMap<String, bool> = HashMap::new();
        for (dir, conn, payload) in frames(&text) {
            let is_new = conn == "new";
            if dir == '>' {
                if is_new && !handshake_pending.contains_key(&conn) {
                    let req = ConnectRequest::from_bytes(&payload)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert_eq!(
                        req.to_bytes(),
                        payload,
                        "{name}: connect request re-encodes"
                    );
                    handshake_pending.insert(conn.clone(), true);
                    continue;
                }
                match frame::decode_client_frame(&payload).unwrap_or_else(|e| panic!("{name}: {e}"))
                {
                    ClientFrame::Request { xid, req } => {
                        let mut again = Vec::new();
                        frame::write_request(&mut again, xid, &req);
                        assert_eq!(&again[4..], &payload[..], "{name}: request re-encodes");
                        inflight.insert((conn.clone(), xid), req.opcode());
                    }
                    ClientFrame::Unknown { op, .. } => panic!("{name}: unknown op {op}"),
                }
            } else {
                if is_new && handshake_pending.get(&conn) == Some(&true) {
                    let resp = ConnectResponse::from_bytes(&payload)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert_eq!(
                        resp.to_bytes(),
                        payload,
                        "{name}: connect response re-encodes"
                    );
                    assert_eq!(resp.passwd.len(), 16);
                    handshake_pending.insert(conn.clone(), false);
                    continue;
                }
                let mut r = Reader::new(&payload);
                let h = ReplyHeader::read(&mut r).unwrap();
                let mut again = Vec::new();
                if h.xid == -1 {
                    let ev = WatcherEvent::read(&mut r).unwrap();
                    frame::write_notification(&mut again, h.zxid, &ev);
                } else {
                    let op = inflight
                        .remove(&(conn.clone(), h.xid))
                        .unwrap_or_else(|| panic!("{name}: reply to unknown xid {}", h.xid));
                    let body = if h.err == 0 {
                        Response::read_body(op, &mut r)
                            .unwrap_or_else(|e| panic!("{name}: {op:?}: {e}"))
                    } else {
                        Response::Empty
                    };
                    assert_eq!(r.remaining(), 0, "{name}: {op:?} reply fully read");
                    frame::write_reply(&mut again, h.xid, h.zxid, h.err, &body);
                }
                assert_eq!(&again[4..], &payload[..], "{name}: reply re-encodes");
            }
            checked += 1;
        }
    }
    assert!(checked > 40, "frames checked: {checked}");
}
