//! Every request and response survives encode -> decode, and no byte string
//! makes the decoder panic or allocate more than it was sent.

use proptest::prelude::*;
use wazoo_proto::frame::{self, ClientFrame};
use wazoo_proto::jute::Reader;
use wazoo_proto::*;

fn path() -> impl Strategy<Value = String> {
    "(/[a-z0-9]{1,6}){1,4}"
}

fn acl() -> impl Strategy<Value = Acl> {
    (
        0..32i32,
        prop_oneof![Just("world"), Just("digest"), Just("ip")],
        "[a-z:=]{0,12}",
    )
        .prop_map(|(p, s, i)| Acl::new(p, s, &i))
}

fn create() -> impl Strategy<Value = CreateRequest> {
    (
        path(),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..32)),
        prop::collection::vec(acl(), 0..3),
        0..7i32,
    )
        .prop_map(|(path, data, acl, flags)| CreateRequest {
            path,
            data,
            acl,
            flags,
            ttl: None,
        })
}

/// A create as a multi holds it once decoded: the flags choose the op
/// (ZooKeeper's MultiOperationRecord), so create with flags 0 to 3 and
/// createContainer with the container flag.
fn multi_create() -> impl Strategy<Value = Request> {
    create().prop_map(|mut c| {
        if c.flags == 4 {
            Request::CreateContainer(c)
        } else {
            c.flags %= 4;
            Request::Create(c)
        }
    })
}

fn write_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        multi_create(),
        (path(), any::<i32>()).prop_map(|(path, version)| Request::Delete { path, version }),
        (
            path(),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
            any::<i32>()
        )
            .prop_map(|(path, data, version)| Request::SetData {
                path,
                data,
                version
            }),
        (path(), any::<i32>()).prop_map(|(path, version)| Request::Check { path, version }),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        write_op(),
        create().prop_map(Request::Create),
        create().prop_map(Request::Create2),
        (path(), any::<bool>()).prop_map(|(path, watch)| Request::GetData { path, watch }),
        (path(), any::<bool>()).prop_map(|(path, watch)| Request::Exists { path, watch }),
        (path(), any::<bool>()).prop_map(|(path, watch)| Request::GetChildren2 { path, watch }),
        (path(), prop::collection::vec(acl(), 0..3), any::<i32>())
            .prop_map(|(path, acl, version)| Request::SetAcl { path, acl, version }),
        prop::collection::vec(write_op(), 0..4).prop_map(Request::Multi),
        (path(), 0..2i32).prop_map(|(path, mode)| Request::AddWatch { path, mode }),
        // ZooKeeper echoes a sync's path unchecked, a null one too.
        prop::option::of(path()).prop_map(|path| Request::Sync { path }),
        Just(Request::Ping),
        Just(Request::WhoAmI),
        Just(Request::CloseSession),
        (
            any::<i64>(),
            prop::collection::vec(path(), 0..3),
            prop::collection::vec(path(), 0..3)
        )
            .prop_map(|(z, d, c)| Request::SetWatches2(SetWatches2 {
                relative_zxid: z,
                data_watches: d,
                exist_watches: vec![],
                child_watches: c,
                persistent_watches: vec![],
                persistent_recursive_watches: vec![],
            })),
    ]
}

proptest! {
    #[test]
    fn requests_round_trip_through_frames(xid in any::<i32>(), req in request()) {
        let mut out = Vec::new();
        frame::write_request(&mut out, xid, &req);
        let n = frame::check(&out, DEFAULT_MAX_BUFFER).unwrap().unwrap();
        prop_assert_eq!(n, out.len());
        let got = frame::decode_client_frame(&out[4..]).unwrap();
        // A check is an op of a multi only: alone it decodes as an unknown
        // opcode (ZOOKEEPER-2623, as ZooKeeper 3.9.3 answers it).
        let want = if matches!(req, Request::Check { .. }) {
            ClientFrame::Unknown { xid, op: OpCode::Check as i32 }
        } else {
            ClientFrame::Request { xid, req }
        };
        prop_assert_eq!(got, want);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = frame::decode_client_frame(&bytes);
        let _ = <ConnectRequest as Jute>::from_bytes(&bytes);
        for op in [OpCode::Create, OpCode::Multi, OpCode::GetData, OpCode::GetAcl, OpCode::WhoAmI] {
            let _ = Response::read_body(op, &mut Reader::new(&bytes));
        }
    }

    #[test]
    fn huge_declared_lengths_are_refused_before_allocating(n in 1_000_000i32..i32::MAX) {
        let mut b = vec![0, 0, 0, 1, 0, 0, 0, 4];
        b.extend_from_slice(&n.to_be_bytes());
        prop_assert!(frame::decode_client_frame(&b).is_err());
    }
}

#[test]
fn responses_round_trip() {
    let stat = Stat {
        czxid: 1,
        mzxid: 2,
        ctime: 3,
        mtime: 4,
        version: 5,
        cversion: 6,
        aversion: 7,
        ephemeral_owner: 8,
        data_length: 9,
        num_children: 10,
        pzxid: 11,
    };
    let cases = vec![
        (OpCode::Create, Response::Create { path: "/a".into() }),
        (
            OpCode::Create2,
            Response::Create2 {
                path: "/a".into(),
                stat: stat.clone(),
            },
        ),
        (OpCode::Exists, Response::Stat(stat.clone())),
        (
            OpCode::Sync,
            Response::Sync {
                path: Some("/a".into()),
            },
        ),
        (OpCode::Sync, Response::Sync { path: None }),
        (
            OpCode::GetData,
            Response::GetData {
                data: Some(b"x".to_vec()),
                stat: stat.clone(),
            },
        ),
        (
            OpCode::GetData,
            Response::GetData {
                data: None,
                stat: stat.clone(),
            },
        ),
        (
            OpCode::GetAcl,
            Response::GetAcl {
                acl: Acl::open_unsafe(),
                stat: stat.clone(),
            },
        ),
        (
            OpCode::GetChildren,
            Response::GetChildren {
                children: vec!["a".into(), "b".into()],
            },
        ),
        (
            OpCode::GetChildren2,
            Response::GetChildren2 {
                children: vec![],
                stat: stat.clone(),
            },
        ),
        (
            OpCode::Multi,
            Response::Multi(vec![
                OpResult::Create { path: "/a".into() },
                OpResult::SetData { stat: stat.clone() },
                OpResult::Delete,
                OpResult::Check,
                OpResult::Error { err: -101 },
            ]),
        ),
        (
            OpCode::GetAllChildrenNumber,
            Response::AllChildrenNumber(42),
        ),
        (
            OpCode::WhoAmI,
            Response::WhoAmI(vec![ClientInfo {
                auth_scheme: "ip".into(),
                user: "127.0.0.1".into(),
            }]),
        ),
    ];
    for (op, resp) in cases {
        let mut out = Vec::new();
        resp.write_body(&mut out);
        let got = Response::read_body(op, &mut Reader::new(&out)).unwrap();
        assert_eq!(got, resp, "{op:?}");
    }
}

/// ZooKeeper Programmer's Guide, "ZooKeeper Data Model": a znode's data
/// may be null. Null node data is jute's null buffer (length -1) both ways,
/// in a setData request, a create and a getData reply (single and inside a
/// multi), never an empty buffer (length 0).
#[test]
fn null_node_data_is_a_length_of_minus_one_on_the_wire() {
    let stat = Stat::default();
    let mut get = Vec::new();
    Response::GetData {
        data: None,
        stat: stat.clone(),
    }
    .write_body(&mut get);
    assert_eq!(&get[..4], &(-1i32).to_be_bytes());
    assert_eq!(get.len(), 4 + stat.to_bytes().len());
    let mut multi = Vec::new();
    Response::Multi(vec![OpResult::GetData {
        data: None,
        stat: stat.clone(),
    }])
    .write_body(&mut multi);
    // After the op's header (op, done, err): the data's length.
    assert_eq!(&multi[9..13], &(-1i32).to_be_bytes());
    let back = Response::read_body(OpCode::MultiRead, &mut Reader::new(&multi)).unwrap();
    assert_eq!(
        back,
        Response::Multi(vec![OpResult::GetData { data: None, stat }])
    );

    let set = Request::SetData {
        path: "/a".into(),
        data: None,
        version: -1,
    };
    let mut body = Vec::new();
    set.write_body(&mut body);
    assert_eq!(&body[6..10], &(-1i32).to_be_bytes());
    let op = OpCode::SetData.code();
    assert_eq!(
        Request::read_body(op, &mut Reader::new(&body)).unwrap(),
        Some(set)
    );
    let create = Request::Create(CreateRequest {
        path: "/a".into(),
        data: None,
        acl: Acl::open_unsafe(),
        flags: 0,
        ttl: None,
    });
    let mut body = Vec::new();
    create.write_body(&mut body);
    assert_eq!(&body[6..10], &(-1i32).to_be_bytes());
    let op = OpCode::Create.code();
    assert_eq!(
        Request::read_body(op, &mut Reader::new(&body)).unwrap(),
        Some(create)
    );
}

#[test]
fn a_recipe_call_carries_its_guid_only_when_the_client_sends_one() {
    let call = |guid: &str| Request::RecipeCall {
        module: "lock".into(),
        method: "acquire".into(),
        args: vec![0x80],
        guid: guid.into(),
    };
    let op = OpCode::RecipeCall.code();
    for guid in ["", "0000000000000001-2a-7"] {
        let mut body = Vec::new();
        call(guid).write_body(&mut body);
        let back = Request::read_body(op, &mut Reader::new(&body)).unwrap();
        assert_eq!(back, Some(call(guid)));
    }
    // A client that sends no guid: the body ends after the arguments.
    let mut with = Vec::new();
    call("g").write_body(&mut with);
    let mut without = Vec::new();
    call("").write_body(&mut without);
    assert_eq!(with.len(), without.len() + 4 + 1);
    // A truncated guid is an error, not an empty one.
    let cut = &with[..with.len() - 1];
    assert!(Request::read_body(op, &mut Reader::new(cut)).is_err());
}

/// Programmer's Guide, "TTL Nodes" and multi's ops: inside a multi, a
/// createTTL record whose flags are not a TTL mode becomes a plain create
/// that keeps its flags as sent, as ZooKeeper 3.8's MultiOperationRecord
/// builds it (`Op.create` keeps the raw flags), so that prep refuses
/// unknown flags with BadArguments before it looks at the path (found by
/// the differential long run).
#[test]
fn a_multi_create_ttl_without_a_ttl_mode_keeps_its_flags() {
    for flags in [-1, 8, 16, 0] {
        let op = |r| Request::Multi(vec![r]);
        let sent = op(Request::CreateTtl(CreateRequest {
            path: "/a/b".into(),
            data: None,
            acl: Acl::open_unsafe(),
            flags,
            ttl: Some(0),
        }));
        let mut body = Vec::new();
        sent.write_body(&mut body);
        let got = Request::read_body(OpCode::Multi.code(), &mut Reader::new(&body)).unwrap();
        let want = op(Request::Create(CreateRequest {
            path: "/a/b".into(),
            data: None,
            acl: Acl::open_unsafe(),
            flags,
            ttl: None,
        }));
        assert_eq!(got, Some(want), "flags {flags}");
    }
}
